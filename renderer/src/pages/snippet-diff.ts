// A small line diff (longest common subsequence) for comparing two versions of a snippet, grouped
// into hunks with a few lines of context, the way `diff -u` shows them. No React here.

export interface DiffLine {
  kind: ' ' | '+' | '-';
  text: string;
  /** Line number in A (for ' ' and '-'). */
  a?: number;
  /** Line number in B (for ' ' and '+'). */
  b?: number;
}

export interface Hunk {
  lines: DiffLine[];
}

/** Above this many cells the LCS table is not built: the changed middle shows as removed, then added. */
const MAX_CELLS = 4_000_000;

export function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split(/\r?\n/);
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** Every line of A and B in order, each kept, removed or added. */
export function diffLines(aText: string, bText: string): DiffLine[] {
  const a = splitLines(aText);
  const b = splitLines(bText);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const out: DiffLine[] = [];
  for (let i = 0; i < start; i++) out.push({ kind: ' ', text: a[i]!, a: i + 1, b: i + 1 });

  const n = endA - start;
  const m = endB - start;
  if (n * m > MAX_CELLS) {
    for (let i = start; i < endA; i++) out.push({ kind: '-', text: a[i]!, a: i + 1 });
    for (let j = start; j < endB; j++) out.push({ kind: '+', text: b[j]!, b: j + 1 });
  } else {
    // lcs[i][j] = length of the LCS of a[start+i..endA) and b[start+j..endB), in one flat array.
    const w = m + 1;
    const lcs = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i * w + j] =
          a[start + i] === b[start + j] ? lcs[(i + 1) * w + j + 1]! + 1 : Math.max(lcs[(i + 1) * w + j]!, lcs[i * w + j + 1]!);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[start + i] === b[start + j]) {
        out.push({ kind: ' ', text: a[start + i]!, a: start + i + 1, b: start + j + 1 });
        i++;
        j++;
      } else if (j < m && (i >= n || lcs[i * w + j + 1]! >= lcs[(i + 1) * w + j]!)) {
        out.push({ kind: '+', text: b[start + j]!, b: start + j + 1 });
        j++;
      } else {
        out.push({ kind: '-', text: a[start + i]!, a: start + i + 1 });
        i++;
      }
    }
  }

  for (let k = 0; endA + k < a.length; k++) out.push({ kind: ' ', text: a[endA + k]!, a: endA + k + 1, b: endB + k + 1 });
  return normalizeOrder(out);
}

/** Within each run of changes, removed lines first, then added ones (easier to read). */
function normalizeOrder(lines: DiffLine[]): DiffLine[] {
  const out: DiffLine[] = [];
  let removed: DiffLine[] = [];
  let added: DiffLine[] = [];
  const flush = () => {
    out.push(...removed, ...added);
    removed = [];
    added = [];
  };
  for (const l of lines) {
    if (l.kind === '-') removed.push(l);
    else if (l.kind === '+') added.push(l);
    else {
      flush();
      out.push(l);
    }
  }
  flush();
  return out;
}

/** The changed places with `context` unchanged lines around each; no hunks when A equals B. */
export function hunks(lines: DiffLine[], context = 3): Hunk[] {
  const changed = lines.map((l, i) => (l.kind === ' ' ? -1 : i)).filter((i) => i >= 0);
  if (changed.length === 0) return [];
  const out: Hunk[] = [];
  let from = Math.max(0, changed[0]! - context);
  let to = Math.min(lines.length, changed[0]! + context + 1);
  for (const i of changed.slice(1)) {
    if (i - context <= to) to = Math.min(lines.length, i + context + 1);
    else {
      out.push({ lines: lines.slice(from, to) });
      from = Math.max(0, i - context);
      to = Math.min(lines.length, i + context + 1);
    }
  }
  out.push({ lines: lines.slice(from, to) });
  return out;
}

export interface FileDiff {
  path: string;
  status: 'added' | 'removed' | 'changed' | 'same';
  added: number;
  removed: number;
  hunks: Hunk[];
}

/** A per-file diff of two bundles (path → content), in path order. */
export function diffBundles(a: Record<string, string>, b: Record<string, string>, context = 3): FileDiff[] {
  const paths = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  return paths.map((path) => {
    const inA = Object.hasOwn(a, path);
    const inB = Object.hasOwn(b, path);
    const lines = diffLines(inA ? a[path]! : '', inB ? b[path]! : '');
    const added = lines.filter((l) => l.kind === '+').length;
    const removed = lines.filter((l) => l.kind === '-').length;
    const status = !inA ? 'added' : !inB ? 'removed' : added + removed === 0 ? 'same' : 'changed';
    return { path, status, added, removed, hunks: hunks(lines, context) };
  });
}
