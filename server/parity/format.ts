import type { ParityReport } from '../../contract/schemas/parity';

/**
 * The human report: a table of every difference (probe, aspect, emulator, target), the skipped and failed
 * probes in the same table, then one summary line. Probes that are the same are not listed (--json has them).
 */
export function formatReport(report: ParityReport): string {
  const rows: [string, string, string, string][] = [];
  for (const p of report.probes) {
    if (p.status === 'differs') for (const d of p.differences) rows.push([p.name, d.aspect, d.emulator ?? '(none)', d.target ?? '(none)']);
    else if (p.status === 'skipped') rows.push([p.name, '(skipped)', p.reason ?? '', '']);
    else if (p.status === 'error') rows.push([p.name, '(error)', p.reason ?? '', '']);
  }
  const lines: string[] = [];
  if (rows.length) {
    const clip = (s: string) => (s.length > 70 ? `${s.slice(0, 69)}…` : s);
    const table = [['probe', 'aspect', 'emulator', 'target'] as [string, string, string, string], ...rows].map((r) => r.map(clip));
    const widths = [0, 1, 2].map((i) => Math.max(...table.map((r) => r[i]!.length)));
    for (const [i, r] of table.entries()) {
      lines.push(
        r
          .map((c, j) => (j < 3 ? c.padEnd(widths[j]!) : c))
          .join('  ')
          .trimEnd(),
      );
      if (i === 0) lines.push(widths.map((w) => '-'.repeat(w)).join('  ') + '  ------');
    }
    lines.push('');
  }
  const s = report.summary;
  const notes = report.probes.flatMap((p) => p.notes.map((n) => `  ${p.name}: ${n}`));
  if (notes.length) lines.push('measured:', ...notes, '');
  const c = report.cleanup;
  if (c.created.length) {
    lines.push(
      c.failed.length
        ? `cleanup: ${c.deleted.length} snippet(s) deleted on the target, ${c.failed.length} NOT: ${c.failed.map((f) => `${f.snippet} (${f.error})`).join(', ')}`
        : `cleanup: every snippet created on the target was deleted (${c.deleted.length})`,
    );
  }
  lines.push(
    `parity ${report.result === 'same' ? 'holds' : 'DIFFERS'} against ${report.target}: ${s.same} same, ${s.differs} differ, ` +
      `${s.skipped} skipped${s.skipped && !report.allow_deploy ? ' (not deployed: --allow-deploy runs them)' : ''}, ${s.error} could not run ` +
      `(${(report.duration_ms / 1000).toFixed(1)} s)`,
  );
  return lines.join('\n') + '\n';
}
