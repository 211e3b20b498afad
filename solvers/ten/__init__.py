"""TEN formulations solved as producers: the drivers (horizon search, early termination with
recovery, time clustering) and the producers ``ten-ilp``, ``ten-lp``, ... built on them."""
