// collsynth report: sort a table by clicking a column title, filter its rows by typed words.
"use strict";

function sortKey(row, col) {
  const cell = row.cells[col];
  return cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
}

function compareKeys(a, b, ascending) {
  if (a === "" || b === "") return (a === "") - (b === "");  // blanks last, either way
  const x = Number(a), y = Number(b);
  const order = !isNaN(x) && !isNaN(y) ? x - y : a.localeCompare(b, undefined, {numeric: true});
  return ascending ? order : -order;
}

function sortBy(table, th) {
  const col = th.cellIndex;
  const ascending = th.getAttribute("aria-sort") !== "ascending";
  for (const other of th.parentNode.cells) other.removeAttribute("aria-sort");
  th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  rows.sort((r, s) => compareKeys(sortKey(r, col), sortKey(s, col), ascending));
  body.append(...rows);
}

function filterRows(table, text, counter) {
  const words = text.toLowerCase().split(/\s+/).filter(Boolean);
  const rows = Array.from(table.tBodies[0].rows);
  let shown = 0;
  for (const row of rows) {
    const keep = words.every(w => row.textContent.toLowerCase().includes(w));
    row.hidden = !keep;
    shown += keep;
  }
  counter.textContent = `${shown} of ${rows.length} rows`;
}

for (const table of document.querySelectorAll("table.sortable")) {
  for (const th of table.tHead.rows[0].cells) {
    th.addEventListener("click", () => sortBy(table, th));
    th.addEventListener("keydown", e => { if (e.key === "Enter") sortBy(table, th); });
  }
}
for (const input of document.querySelectorAll("input.filter")) {
  const table = document.getElementById(input.dataset.table);
  const counter = document.getElementById(input.dataset.table + "-count");
  input.addEventListener("input", () => filterRows(table, input.value, counter));
}
