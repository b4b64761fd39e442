// An agent run on one time axis: a bar per step (LangGraph node, Mastra step, tool call, model call seen by
// the framework) and per model call the egress path saw (its first token marked), and under them, on the same
// axis, the run's memory and CPU against its limits (the samples of the usage timeline, dashed limit lines,
// throttled samples marked). What LangGraph Studio and Mastra's playground cannot show: which step was
// running when the memory climbed or the CPU cap bit. Hover a bar for its times; the steps are also a list.
import { mb, niceTicks, tLabel, useWidth, type Limits, type Sample } from './invocation-common';

export interface TimelineRow {
  key: string;
  label: string;
  depth: number;
  kind: 'node' | 'step' | 'tool' | 'llm' | 'call';
  start: number;
  /** Null: still going (drawn to `now`). */
  end: number | null;
  /** A model call's first token, ms after its start. */
  firstToken?: number | null;
  failed?: boolean;
}

const PAD_L = 150;
const PAD_R = 16;
const ROW = 20;
const PANEL = 56;
const GAP = 14;
const AXIS = 22;
const MAX_ROWS = 60;

export function AgentTimeline({
  rows,
  samples,
  limits,
  endMs,
}: {
  rows: TimelineRow[];
  samples: Sample[];
  limits: Limits;
  /** The run's end (or now, while it runs): the axis spans 0 to this at least. */
  endMs: number;
}) {
  const [ref, width] = useWidth<HTMLDivElement>();
  const shown = rows.slice(0, MAX_ROWS);
  const xMax = Math.max(1, endMs, ...rows.map((r) => r.end ?? r.start), samples.at(-1)?.t_ms ?? 0);
  const plotW = Math.max(40, width - PAD_L - PAD_R);
  const x = (t: number) => PAD_L + (Math.max(0, Math.min(t, xMax)) / xMax) * plotW;
  const rowsH = shown.length * ROW;
  const memTop = rowsH + GAP;
  const cpuTop = memTop + PANEL + GAP;
  const hasSamples = samples.length > 0;
  const axisTop = hasSamples ? cpuTop + PANEL + 6 : rowsH + 6;
  const height = axisTop + AXIS;
  const ticks = niceTicks(xMax, Math.max(2, Math.floor(plotW / 90))).filter((t) => t <= xMax);

  const peak = samples.reduce((m, s) => Math.max(m, s.memory_mb), 0);
  const memMax = Math.max(limits.max_memory_mb, peak) * 1.1 || 1;
  const cpuPeak = samples.reduce((m, s) => Math.max(m, s.cpu_percent), 0);
  const cpuMax = Math.max(limits.max_cpu_percent, cpuPeak, 1) * 1.15;
  const yMem = (v: number) => memTop + PANEL - (Math.min(v, memMax) / memMax) * PANEL;
  const yCpu = (v: number) => cpuTop + PANEL - (Math.min(v, cpuMax) / cpuMax) * PANEL;
  const path = (f: (s: Sample) => number) => samples.map((s, i) => `${i ? 'L' : 'M'}${x(s.t_ms).toFixed(1)} ${f(s).toFixed(1)}`).join(' ');

  return (
    <div className="agent-tl" ref={ref} data-testid="agent-timeline">
      {width > 0 && (
        <svg
          width={width}
          height={height}
          role="img"
          aria-label={`Steps and model calls over ${tLabel(xMax)}, with memory and CPU against the limits`}
        >
          {ticks.map((t) => (
            <line key={`g${t}`} className="agent-tl-grid" x1={x(t)} x2={x(t)} y1={0} y2={axisTop} />
          ))}
          {shown.map((r, i) => {
            const y = i * ROW;
            const x1 = x(r.start);
            const x2 = Math.max(x1 + 2, x(r.end ?? xMax));
            return (
              <g key={r.key} data-testid="agent-tl-row" data-kind={r.kind} data-name={r.label}>
                <text className="agent-tl-label" x={8 + r.depth * 10} y={y + ROW / 2 + 4}>
                  {r.label.length > 20 - r.depth * 2 ? `${r.label.slice(0, 19 - r.depth * 2)}…` : r.label}
                </text>
                <rect
                  className={`agent-tl-bar agent-tl-${r.kind}${r.failed ? ' agent-tl-failed' : ''}${r.end === null ? ' agent-tl-going' : ''}`}
                  x={x1}
                  y={y + 4}
                  width={x2 - x1}
                  height={ROW - 8}
                  rx={3}
                >
                  <title>{`${r.label}: +${tLabel(r.start)} → ${r.end === null ? 'still going' : `+${tLabel(r.end)} (${tLabel(r.end - r.start)})`}${
                    r.firstToken != null ? `, first token after ${tLabel(r.firstToken)}` : ''
                  }`}</title>
                </rect>
                {r.firstToken != null && (
                  <line
                    className="agent-tl-ttft"
                    x1={x(r.start + r.firstToken)}
                    x2={x(r.start + r.firstToken)}
                    y1={y + 2}
                    y2={y + ROW - 2}
                  />
                )}
              </g>
            );
          })}
          {hasSamples && (
            <g data-testid="agent-tl-limits">
              <text className="agent-tl-label" x={8} y={memTop + 14}>
                memory
              </text>
              <text className="agent-tl-sub" x={8} y={memTop + 28}>
                peak {mb(peak)}
              </text>
              <path
                className="agent-tl-mem"
                d={`${path((s) => yMem(s.memory_mb))} L${x(samples.at(-1)!.t_ms)} ${memTop + PANEL} L${x(samples[0]!.t_ms)} ${memTop + PANEL} Z`}
              />
              <line
                className="agent-tl-limit"
                x1={PAD_L}
                x2={PAD_L + plotW}
                y1={yMem(limits.max_memory_mb)}
                y2={yMem(limits.max_memory_mb)}
              >
                <title>{`max_memory_mb ${limits.max_memory_mb}`}</title>
              </line>
              <text className="agent-tl-sub" x={8} y={cpuTop + 14}>
                CPU (limit {limits.max_cpu_percent} %)
              </text>
              <path className="agent-tl-cpu" d={path((s) => yCpu(s.cpu_percent))} />
              {samples
                .filter((s) => s.throttled)
                .map((s, i) => (
                  <circle key={i} className="agent-tl-thr" cx={x(s.t_ms)} cy={yCpu(s.cpu_percent)} r={2.5} />
                ))}
              <line
                className="agent-tl-limit"
                x1={PAD_L}
                x2={PAD_L + plotW}
                y1={yCpu(limits.max_cpu_percent)}
                y2={yCpu(limits.max_cpu_percent)}
              >
                <title>{`max_cpu_percent ${limits.max_cpu_percent}`}</title>
              </line>
            </g>
          )}
          <line className="agent-tl-axis" x1={PAD_L} x2={PAD_L + plotW} y1={axisTop} y2={axisTop} />
          {ticks.map((t) => (
            <text key={`t${t}`} className="agent-tl-tick" x={x(t)} y={axisTop + 15} textAnchor="middle">
              {tLabel(t)}
            </text>
          ))}
        </svg>
      )}
      {rows.length > MAX_ROWS && (
        <p className="muted agent-small">
          The first {MAX_ROWS} of {rows.length} rows; every step is in the list below.
        </p>
      )}
      {!hasSamples && <p className="muted agent-small">No memory or CPU samples for this run yet (they are recorded when it ends).</p>}
    </div>
  );
}
