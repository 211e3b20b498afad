"""Published facts the tests check the generators against, written here by hand from their
sources (never imported from the code under test)."""

# NVLink count between each pair of GPUs of NVIDIA's DGX-1 with V100 (the hybrid cube-mesh; row i
# is GPU i), as the project's specification states it (its notes on the papers, "useful facts"):
# two fully connected quads 0-3 and 4-7, GPU i joined to GPU i + 4, six NVLinks per GPU.
DGX1_NVLINK_COUNTS = (
    (0, 2, 1, 1, 2, 0, 0, 0),
    (2, 0, 1, 2, 0, 1, 0, 0),
    (1, 1, 0, 2, 0, 0, 2, 0),
    (1, 2, 2, 0, 0, 0, 0, 1),
    (2, 0, 0, 0, 0, 2, 1, 1),
    (0, 1, 0, 0, 2, 0, 1, 2),
    (0, 0, 2, 0, 1, 1, 0, 2),
    (0, 0, 0, 1, 1, 2, 2, 0),
)
