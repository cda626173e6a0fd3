// A small line diff (longest common subsequence after trimming the common head and tail), for comparing a
// replay's response with its original's. Bounded: beyond MAX_CELLS the middle is shown as removed + added.

const MAX_CELLS = 4_000_000;

/** `[{ op: ' ' | '-' | '+', line }]` turning `a` into `b`. */
export function lineDiff(a, b) {
  const left = a.split('\n');
  const right = b.split('\n');
  let head = 0;
  while (head < left.length && head < right.length && left[head] === right[head]) head++;
  let tail = 0;
  while (
    tail < left.length - head &&
    tail < right.length - head &&
    left[left.length - 1 - tail] === right[right.length - 1 - tail]
  ) {
    tail++;
  }
  const x = left.slice(head, left.length - tail);
  const y = right.slice(head, right.length - tail);
  const out = left.slice(0, head).map((line) => ({ op: ' ', line }));
  if (x.length * y.length > MAX_CELLS) {
    for (const line of x) out.push({ op: '-', line });
    for (const line of y) out.push({ op: '+', line });
  } else {
    out.push(...middle(x, y));
  }
  for (const line of left.slice(left.length - tail)) out.push({ op: ' ', line });
  return out;
}

function middle(x, y) {
  const n = x.length;
  const m = y.length;
  // lcs[i][j]: the LCS length of x[i..] and y[j..], in one flat array.
  const lcs = new Uint32Array((n + 1) * (m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * (m + 1) + j] =
        x[i] === y[j]
          ? lcs[(i + 1) * (m + 1) + j + 1] + 1
          : Math.max(lcs[(i + 1) * (m + 1) + j], lcs[i * (m + 1) + j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) {
      out.push({ op: ' ', line: x[i] });
      i++;
      j++;
    } else if (lcs[(i + 1) * (m + 1) + j] >= lcs[i * (m + 1) + j + 1]) {
      out.push({ op: '-', line: x[i++] });
    } else {
      out.push({ op: '+', line: y[j++] });
    }
  }
  while (i < n) out.push({ op: '-', line: x[i++] });
  while (j < m) out.push({ op: '+', line: y[j++] });
  return out;
}
