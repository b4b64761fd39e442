import { createHash } from 'node:crypto';
import { REPORT_REPRO_ELEMENT_ID, type ReportRepro } from '../../contract/schemas/report';
import type { ReportItem } from './collect';

/**
 * Renders the run report: one HTML file with everything inline (CSS, a few lines of script, SVG charts)
 * and a CSP that forbids every load, so opening it from disk makes no network request. Everything that
 * came from a snippet, its input or its calls is escaped here (`esc`, `jsonForScript`): hostile output
 * cannot script the page.
 */

/** HTML text and attribute values. */
export const esc = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/**
 * JSON for a `<script type="application/json">` block: no `<`, `>`, `&` or line separators survive as
 * such, so neither `</script>` nor `<!--` can end or bend the block; `JSON.parse` reads it back unchanged.
 */
export const jsonForScript = (value: unknown): string =>
  JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** The most of one text block (logs, a body, a file) shown; the embedded payload keeps what the emulator kept. */
const SHOWN_MAX_CHARS = 256 * 1024;

const clip = (s: string, max = SHOWN_MAX_CHARS) =>
  s.length > max ? `${s.slice(0, max)}\n… (${s.length - max} more characters not shown)` : s;
const pretty = (v: unknown): string => {
  if (v === undefined) return '';
  try {
    return JSON.stringify(v, null, 2) ?? typeof v;
  } catch (err) {
    return `(not JSON: ${(err as Error).message})`;
  }
};
const pre = (text: string, cls = '') => `<pre${cls ? ` class="${cls}"` : ''}>${esc(clip(text))}</pre>`;
const num = (n: number | null | undefined, unit = '') => (n === null || n === undefined ? '—' : `${Math.round(n * 10) / 10}${unit}`);
const row = (label: string, value: string) => `<tr><th scope="row">${esc(label)}</th><td>${value}</td></tr>`;
const text = (v: string | number | boolean | null | undefined) => (v === null || v === undefined ? '—' : esc(String(v)));

const CSS = `
:root{color-scheme:light;--fg:#1d1f23;--mut:#5d6470;--line:#d5d9e0;--bg:#fff;--soft:#f4f6f9;--bad:#b3261e;--ok:#1e6b35;--warn:#8a5a00;--acc:#2456a6}
*{box-sizing:border-box}body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg);margin:0 auto;max-width:1100px;padding:24px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:2px solid var(--line);padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
.mut{color:var(--mut)}table{border-collapse:collapse;width:100%;margin:4px 0 8px}th,td{border:1px solid var(--line);padding:3px 6px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}th[scope=row]{width:28%}td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{background:var(--soft);border:1px solid var(--line);padding:8px;overflow:auto;max-height:420px;white-space:pre-wrap;word-break:break-word;margin:4px 0}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;border:1px solid currentColor}
.o-success{color:var(--ok)}.o-handler_error,.o-oom_killed,.o-timeout,.o-failed{color:var(--bad)}.o-cancelled{color:var(--warn)}
details{margin:6px 0}summary{cursor:pointer;font-weight:600}
svg.chart{width:100%;max-width:720px;height:auto;border:1px solid var(--line);background:#fff}
svg .axis{stroke:#9aa1ab;stroke-width:1}svg .grid{stroke:#e7eaef;stroke-width:1}svg .series{fill:none;stroke:var(--acc);stroke-width:1.6}
svg .limit{stroke:var(--bad);stroke-width:1.2;stroke-dasharray:6 4}svg .throttled{fill:var(--warn)}svg text{font:11px system-ui,sans-serif;fill:var(--mut)}svg .limit-label{fill:var(--bad)}
.toc li{margin:2px 0}code{background:var(--soft);padding:0 3px}
@media print{body{max-width:none;padding:0}pre{max-height:none;overflow:visible}details>summary{list-style:none}h2{break-after:avoid}section.inv{break-before:page}section.inv:first-of-type{break-before:auto}}
`;

/** Opens every collapsed section for printing. */
const SCRIPT = `addEventListener('beforeprint',function(){document.querySelectorAll('details').forEach(function(d){d.open=true})});`;

const hash = (s: string) => `'sha256-${createHash('sha256').update(s, 'utf8').digest('base64')}'`;

/** The policy: nothing may load (no fonts, images, frames, fetches); only this style block and this script run. */
export const REPORT_CSP = `default-src 'none'; style-src ${hash(CSS)}; script-src ${hash(SCRIPT)}; img-src 'none'; font-src 'none'; connect-src 'none'; frame-src 'none'; media-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'`;

export function renderReport(
  items: readonly ReportItem[],
  repro: ReportRepro | null,
  meta: { generatedAt: Date; emulator: string },
): string {
  const title = items.length === 1 ? `${items[0]!.snippet.name} — ${items[0]!.record.id}` : `${items.length} invocations`;
  const toc =
    items.length > 1
      ? `<ol class="toc">${items
          .map(
            (i) =>
              `<li><a href="#${esc(i.record.id)}">${esc(i.snippet.name)} v${i.record.version} — ${esc(i.record.id)}</a> ${outcomeBadge(i)}</li>`,
          )
          .join('')}</ol>`
      : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${esc(REPORT_CSP)}">
<meta name="referrer" content="no-referrer">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="svc-emu ${esc(meta.emulator)}">
<title>Run report: ${esc(title)}</title>
<style>${CSS}</style>
</head>
<body>
<header>
<h1>Run report</h1>
<p class="mut">Snippet Emulator ${esc(meta.emulator)} · generated ${esc(meta.generatedAt.toISOString())} · ${items.length} invocation${items.length === 1 ? '' : 's'}</p>
${toc}
${reproHelp(items, repro)}
</header>
${items.map(renderItem).join('\n')}
<script type="application/json" id="${REPORT_REPRO_ELEMENT_ID}">${repro ? jsonForScript(repro) : 'null'}</script>
<script>${SCRIPT}</script>
</body>
</html>
`;
}

function reproHelp(items: readonly ReportItem[], repro: ReportRepro | null): string {
  if (!repro) return '<p class="mut">No reproduction payload: the versions these runs used are gone.</p>';
  const missing = items.filter((i) => !i.version).map((i) => i.record.id);
  return `<details open><summary>Reproduce on another emulator</summary>
<p>This file embeds the code, limits, input and recorded outbound calls of ${repro.invocations.length === 1 ? 'the run' : `${repro.invocations.length} runs`}. On the other machine:</p>
${pre('npx svc-emu import-report THIS-FILE.html\nnpx svc-emu invoke --replay <the id it prints>')}
<p class="mut">The rerun replays the outbound calls from the embedded cassette (nothing goes out).${missing.length ? ` Not included (version gone): ${esc(missing.join(', '))}.` : ''}</p>
</details>`;
}

function outcomeBadge(i: ReportItem): string {
  const o = i.record.outcome ?? i.record.status;
  return `<span class="badge o-${esc(o)}">${esc(o)}</span>`;
}

function renderItem(i: ReportItem): string {
  const r = i.record;
  const v = i.view;
  return `<section class="inv" id="${esc(r.id)}" data-invocation="${esc(r.id)}">
<h2>${esc(i.snippet.name)} v${r.version} ${outcomeBadge(i)}</h2>
<table class="summary"><tbody>
${row('Invocation', `<code>${esc(r.id)}</code>`)}
${row('Tenant', text(i.tenant.name))}
${row('Snippet', `${text(i.snippet.name)} (${text(i.snippet.runtime)})${i.snippet.description ? ` — ${esc(i.snippet.description)}` : ''}`)}
${row('Version', String(r.version))}
${row('Environment', text(r.env))}
${row('Mode', text(r.mode))}
${row('Status / outcome', `${text(r.status)} / ${text(r.outcome)}`)}
${row('Created · started · finished', `${text(r.created_at)} · ${text(r.started_at)} · ${text(r.finished_at)}`)}
${row('Attempts · warm sandbox', `${r.attempts} · ${r.warm === null ? '—' : r.warm ? 'warm' : 'cold'}`)}
${i.record.egress ? row('Egress mode', `${text(i.record.egress.mode)} (from ${text(i.record.egress.source)})${i.record.egress.cassette ? `, cassette <code>${esc(i.record.egress.cassette)}</code>` : ''}`) : ''}
</tbody></table>
${v.error ? `<h3>Error</h3><p><strong>${esc(v.error.code)}</strong>: ${esc(v.error.message)}</p>${v.error.stack ? pre(v.error.stack) : ''}` : ''}
${renderLimits(i)}
${renderEvidence(i)}
<h3>Memory and CPU</h3>
${renderTimeline(i)}
<h3>Input</h3>
${i.stored.input ? pre(pretty(i.stored.input), 'input') : `<p class="mut">${i.stored.input_truncated ? 'Over 64 KiB of JSON: not kept.' : 'Not kept.'}</p>`}
<h3>Output</h3>
${v.output === null || v.output === undefined ? '<p class="mut">None.</p>' : pre(pretty(v.output), 'output')}
<h3>Logs${i.logs.truncated ? ' <span class="mut">(truncated)</span>' : ''}</h3>
${i.logs.text ? pre(i.logs.text, 'logs') : '<p class="mut">None.</p>'}
${renderEgress(i)}
${renderStream(i)}
${renderAgent(i)}
${renderParity(i)}
${renderCode(i)}
</section>`;
}

function renderLimits(i: ReportItem): string {
  const fields = ['timeout_ms', 'max_memory_mb', 'max_cpu_percent'] as const;
  const o = i.stored.overrides ?? {};
  return `<h3>Limits</h3>
<table class="limits"><thead><tr><th>Limit</th><th>This run</th><th>Version</th><th>Override (X-Emu-Limits)</th><th>Tenant cap</th></tr></thead><tbody>
${fields
  .map(
    (f) =>
      `<tr><th scope="row">${f}</th><td class="n">${i.record.limits[f]}</td><td class="n">${i.version ? i.version[f] : '—'}</td><td class="n">${o[f] ?? '—'}</td><td class="n">${i.tenant.caps[f]}</td></tr>`,
  )
  .join('\n')}
<tr><th scope="row">max_concurrency</th><td class="n">—</td><td class="n">—</td><td class="n">—</td><td class="n">${i.tenant.caps.max_concurrency}</td></tr>
</tbody></table>
${i.view.usage ? `<table class="usage"><tbody>${row('Duration', num(i.view.usage.duration_ms, ' ms'))}${row('Init', num(i.view.usage.init_ms, ' ms'))}${row('CPU', num(i.view.usage.cpu_ms, ' ms'))}${row('CPU throttled', num(i.view.usage.cpu_throttled_ms, ' ms'))}${row('Peak memory', num(i.view.usage.peak_memory_mb, ' MB'))}</tbody></table>` : ''}`;
}

function renderEvidence(i: ReportItem): string {
  const r = i.record;
  const u = r.usage;
  const lines: string[] = [];
  if (r.outcome === 'oom_killed')
    lines.push(`Killed for memory: the limit was ${r.limits.max_memory_mb} MB; peak seen ${num(u?.peak_memory_mb, ' MB')}.`);
  if (r.outcome === 'timeout') lines.push(`Timed out: the limit was ${r.limits.timeout_ms} ms; it ran ${num(u?.duration_ms, ' ms')}.`);
  const throttledSamples = i.timeline.filter((s) => s.throttled).length;
  if (u && u.cpu_throttled_ms > 0)
    lines.push(
      `CPU throttled for ${num(u.cpu_throttled_ms, ' ms')} at max_cpu_percent ${r.limits.max_cpu_percent} (${throttledSamples} of ${i.timeline.length} samples throttled).`,
    );
  if (!lines.length && !i.evidence) return '';
  return `<h3>Evidence</h3>
<ul class="evidence">${lines.map((l) => `<li>${esc(l)}</li>`).join('')}</ul>
${
  i.evidence
    ? `<table class="evidence"><tbody>${Object.entries(i.evidence)
        .map(([k, val]) => row(k, esc(typeof val === 'string' ? val : pretty(val))))
        .join('')}</tbody></table>`
    : ''
}`;
}

/** Two inline SVG charts: memory against max_memory_mb, CPU % against max_cpu_percent (throttled samples marked). */
function renderTimeline(i: ReportItem): string {
  const t = i.timeline;
  if (!t.length) return '<p class="mut">No samples (the run ended before the first one, or never started).</p>';
  const endT = Math.max(t.at(-1)!.t_ms, i.record.usage?.duration_ms ?? 0, 1);
  return (
    chart('memory', 'Memory (MB)', t, endT, (s) => s.memory_mb, i.record.limits.max_memory_mb, 'max_memory_mb') +
    chart('cpu', 'CPU (%)', t, endT, (s) => s.cpu_percent, i.record.limits.max_cpu_percent, 'max_cpu_percent', true)
  );
}

function chart(
  kind: string,
  label: string,
  samples: ReportItem['timeline'],
  endT: number,
  value: (s: ReportItem['timeline'][number]) => number,
  limit: number,
  limitName: string,
  markThrottled = false,
): string {
  const W = 720;
  const H = 200;
  const L = 48;
  const R = 12;
  const T = 14;
  const B = 28;
  const maxV = Math.max(limit * 1.15, ...samples.map(value), 1);
  const x = (ms: number) => L + (ms / endT) * (W - L - R);
  const y = (v: number) => T + (1 - v / maxV) * (H - T - B);
  const f = (n: number) => n.toFixed(1);
  const points = samples.map((s) => `${f(x(s.t_ms))},${f(y(value(s)))}`).join(' ');
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((k) => {
    const v = maxV * k;
    return `<line class="grid" x1="${L}" x2="${W - R}" y1="${f(y(v))}" y2="${f(y(v))}"/><text x="${L - 4}" y="${f(y(v) + 4)}" text-anchor="end">${Math.round(v)}</text>`;
  });
  const anchor = (k: number) => (k === 0 ? 'start' : k === 1 ? 'end' : 'middle');
  const xt = [0, 0.5, 1].map(
    (k) => `<text x="${f(x(endT * k))}" y="${H - 10}" text-anchor="${anchor(k)}">${Math.round(endT * k)} ms</text>`,
  );
  const throttled = markThrottled
    ? samples
        .filter((s) => s.throttled)
        .map(
          (s) =>
            `<circle class="throttled" cx="${f(x(s.t_ms))}" cy="${f(y(value(s)))}" r="3"><title>throttled at ${s.t_ms} ms</title></circle>`,
        )
        .join('')
    : '';
  const nThrottled = samples.filter((s) => s.throttled).length;
  return `<figure>
<svg class="chart" data-chart="${kind}" data-samples="${samples.length}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(label)} over time, ${samples.length} samples, limit ${limit}" xmlns="http://www.w3.org/2000/svg">
${ticks.join('')}
<line class="axis" x1="${L}" x2="${L}" y1="${T}" y2="${H - B}"/><line class="axis" x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}"/>
${xt.join('')}
<line class="limit" x1="${L}" x2="${W - R}" y1="${f(y(limit))}" y2="${f(y(limit))}"/><text class="limit-label" x="${W - R - 2}" y="${f(y(limit) - 4)}" text-anchor="end">${limitName} ${limit}</text>
<polyline class="series" points="${points}"/>
${throttled}
</svg>
<figcaption class="mut">${esc(label)}: ${samples.length} samples over ${Math.round(endT)} ms; dashed line = ${limitName} (${limit})${markThrottled ? `; ${nThrottled} throttled sample${nThrottled === 1 ? '' : 's'} marked` : ''}.</figcaption>
</figure>`;
}

function renderEgress(i: ReportItem): string {
  if (!i.har.length && !i.egressLog.length) return '<h3>Outbound calls</h3><p class="mut">None recorded.</p>';
  const har = i.har.length
    ? `<table class="har"><thead><tr><th>#</th><th>Source</th><th>Request</th><th>Status</th><th>Time</th><th>Error</th></tr></thead><tbody>${i.har
        .map(
          (e) =>
            `<tr><td class="n">${e._svcEmu.seq}</td><td>${esc(e._svcEmu.source)}${e._svcEmu.integration ? ` (${esc(e._svcEmu.integration)})` : ''}</td><td>${esc(e.request.method)} ${esc(e.request.url)}</td><td class="n">${e.response.status || '—'}</td><td class="n">${num(e.time, ' ms')}</td><td>${text(e._svcEmu.error)}</td></tr>`,
        )
        .join('')}</tbody></table>
${i.har
  .map(
    (e) => `<details><summary>#${e._svcEmu.seq} ${esc(e.request.method)} ${esc(e.request.url)}</summary>
<p class="mut">Request headers</p>${pre(e.request.headers.map((h) => `${h.name}: ${h.value}`).join('\n'))}
${e.request.postData?.text ? `<p class="mut">Request body</p>${pre(e.request.postData.text)}` : ''}
<p class="mut">Response ${e.response.status} ${esc(e.response.statusText)}${e._svcEmu.chunks.length ? `, ${e._svcEmu.chunks.length} chunks over ${num(e._svcEmu.chunks.at(-1)!.t_ms, ' ms')}` : ''}</p>${pre(e.response.headers.map((h) => `${h.name}: ${h.value}`).join('\n'))}
${e.response.content.text ? pre(e.response.content.text) : ''}
${e._svcEmu.redacted.length ? `<p class="mut">Redacted: ${esc(e._svcEmu.redacted.join(', '))}</p>` : ''}
</details>`,
  )
  .join('\n')}`
    : '';
  const log = i.egressLog.length
    ? `<h3>Egress log</h3><table class="egress-log"><thead><tr><th>At</th><th>Source</th><th>Request</th><th>Status</th><th>ms</th><th>Bytes out/in</th><th>Fault / refused / error</th></tr></thead><tbody>${i.egressLog
        .map(
          (e) =>
            `<tr><td>${esc(e.at)}</td><td>${esc(e.source)}${e.integration ? ` (${esc(e.integration)})` : ''}</td><td>${esc(e.method)} ${esc(e.host)}:${e.port}${esc(e.path ?? '')}</td><td class="n">${e.status ?? '—'}</td><td class="n">${num(e.duration_ms)}</td><td class="n">${e.bytes_out}/${e.bytes_in}</td><td>${esc([e.fault, e.refused, e.error].filter(Boolean).join(' · ')) || '—'}</td></tr>`,
        )
        .join('')}</tbody></table>`
    : '';
  return `<h3>Outbound calls (${i.har.length})</h3>${har}${log}`;
}

function renderStream(i: ReportItem): string {
  if (!i.stream.events.length) return '';
  return `<h3>Stream frames (${i.stream.events.length}${i.stream.truncated ? ', truncated' : ''})</h3>
<table class="stream"><thead><tr><th>id</th><th>event</th><th>t (ms)</th><th>data</th></tr></thead><tbody>${i.stream.events
    .map(
      (e) =>
        `<tr><td class="n">${e.id}</td><td>${esc(e.event)}</td><td class="n">${num(e.t_ms)}</td><td><code>${esc(clip(JSON.stringify(e.data) ?? '', 2000))}</code></td></tr>`,
    )
    .join('')}</tbody></table>`;
}

function renderAgent(i: ReportItem): string {
  const a = i.agent;
  if (!a || (!a.steps.length && !a.provider_calls.length)) return '';
  return `<h3>Agent steps (${esc(a.framework ?? 'unknown')}, ${a.steps.length}${a.truncated ? ', truncated' : ''})</h3>
<table class="agent"><thead><tr><th>Kind</th><th>Name</th><th>Start (ms)</th><th>End (ms)</th><th>Error</th></tr></thead><tbody>${a.steps
    .map(
      (s) =>
        `<tr><td>${esc(s.kind)}</td><td>${esc(s.name)}</td><td class="n">${num(s.started_ms)}</td><td class="n">${num(s.ended_ms)}</td><td>${text(s.error)}</td></tr>`,
    )
    .join('')}</tbody></table>
<details><summary>Steps with inputs and outputs</summary>${pre(pretty(a.steps))}</details>
${a.provider_calls.length ? `<details><summary>Model calls (${a.provider_calls.length})</summary>${pre(pretty(a.provider_calls))}</details>` : ''}`;
}

function renderParity(i: ReportItem): string {
  const p = i.record.parity;
  return `<h3>Parity</h3>
<p>${p.status === 'full' ? 'Full: limits enforced as production does.' : `<strong>Degraded</strong>: ${esc(p.reasons.join('; '))}`}</p>
${i.record.parity_warnings.length ? `<ul class="warnings">${i.record.parity_warnings.map((w) => `<li>${esc(w)}</li>`).join('')}</ul>` : ''}`;
}

function renderCode(i: ReportItem): string {
  if (!i.version) return '<h3>Code</h3><p class="mut">The version is gone from this emulator.</p>';
  const files = Object.entries(i.version.files);
  return `<h3>Code (${files.length} file${files.length === 1 ? '' : 's'}, entrypoint <code>${esc(i.version.entrypoint)}</code>)</h3>
${files.map(([path, code]) => `<details${path === i.version!.entrypoint ? ' open' : ''}><summary>${esc(path)}</summary>${pre(code)}</details>`).join('\n')}
${i.version.egress ? `<p class="mut">egress (snippet.json): <code>${esc(JSON.stringify(i.version.egress))}</code></p>` : ''}`;
}
