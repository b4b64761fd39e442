// The memory/CPU timeline of one invocation, drawn against its limits: an inline SVG with a memory
// panel (MB, the max_memory_mb limit dashed), a CPU panel (%, the max_cpu_percent limit dashed, throttled
// samples marked) and, on the same time axis, a strip with a tick per stream event. Hover or arrow keys
// read one sample; the samples are also a table for anyone who cannot see the chart.
import { useState, type KeyboardEvent, type PointerEvent } from 'react';
import { compact, mb, niceTicks, tLabel, useWidth, type Limits, type RecordedEvent, type Sample } from './invocation-common';

const PAD_L = 58;
const PAD_R = 18;
const GAP = 26;
const STRIP = 30;
const AXIS = 22;

type Scale = 'limits' | 'usage';

export function TimelineChart({
  samples,
  limits,
  events,
  durationMs,
  peakMb,
}: {
  samples: Sample[];
  limits: Limits;
  events: RecordedEvent[];
  durationMs: number | null;
  /** The run's measured peak (the samples may miss it between two polls). */
  peakMb: number | null;
}) {
  const [wrapRef, width] = useWidth<HTMLDivElement>();
  const [scale, setScale] = useState<Scale>('limits');
  const [hover, setHover] = useState<number | null>(null);

  const narrow = width > 0 && width < 520;
  const memH = narrow ? 120 : 150;
  const cpuH = narrow ? 84 : 104;
  const memTop = 20;
  const cpuTop = memTop + memH + GAP;
  const stripTop = cpuTop + cpuH + (events.length ? 12 : 0);
  const axisTop = stripTop + (events.length ? STRIP : 0);
  const height = axisTop + AXIS;

  const lastT = Math.max(samples.at(-1)?.t_ms ?? 0, events.at(-1)?.t_ms ?? 0, durationMs ?? 0);
  const xMax = lastT > 0 ? lastT : 1;
  const plotW = Math.max(10, width - PAD_L - PAD_R);
  const x = (t: number) => PAD_L + (Math.min(t, xMax) / xMax) * plotW;

  const peak = Math.max(
    peakMb ?? 0,
    samples.reduce((m, s) => Math.max(m, s.memory_mb), 0),
  );
  const cpuPeak = samples.reduce((m, s) => Math.max(m, s.cpu_percent), 0);
  const throttled = samples.filter((s) => s.throttled).length;
  const memMax = scale === 'limits' ? Math.max(limits.max_memory_mb, peak) * 1.12 : Math.max(peak * 1.25, 1);
  const cpuMax = scale === 'limits' ? Math.max(limits.max_cpu_percent, cpuPeak, 1) * 1.15 : Math.max(cpuPeak * 1.25, 1);
  const yMem = (v: number) => memTop + memH - (Math.min(v, memMax) / memMax) * memH;
  const yCpu = (v: number) => cpuTop + cpuH - (Math.min(v, cpuMax) / cpuMax) * cpuH;

  const line = (f: (s: Sample) => number) => samples.map((s, i) => `${i ? 'L' : 'M'}${x(s.t_ms).toFixed(1)} ${f(s).toFixed(1)}`).join(' ');
  const memLine = line((s) => yMem(s.memory_mb));
  const memArea = samples.length
    ? `${memLine} L${x(samples.at(-1)!.t_ms).toFixed(1)} ${memTop + memH} L${x(samples[0]!.t_ms).toFixed(1)} ${memTop + memH} Z`
    : '';
  const cpuLine = line((s) => yCpu(s.cpu_percent));
  const xTicks = niceTicks(xMax, Math.max(2, Math.floor(plotW / 90))).filter((t) => t <= xMax);
  const memTicks = niceTicks(memMax, 3).filter((v) => v <= memMax);
  const cpuTicks = niceTicks(cpuMax, 2).filter((v) => v <= cpuMax);
  const memLimitShown = limits.max_memory_mb <= memMax;
  const cpuLimitShown = limits.max_cpu_percent <= cpuMax;

  const pick = (e: PointerEvent<SVGSVGElement>) => {
    if (!samples.length) return;
    const box = e.currentTarget.getBoundingClientRect();
    const t = ((e.clientX - box.left - PAD_L) / plotW) * xMax;
    let best = 0;
    for (let i = 1; i < samples.length; i++) if (Math.abs(samples[i]!.t_ms - t) < Math.abs(samples[best]!.t_ms - t)) best = i;
    setHover(best);
  };
  const key = (e: KeyboardEvent<SVGSVGElement>) => {
    if (!samples.length) return;
    const last = samples.length - 1;
    const next =
      e.key === 'ArrowRight'
        ? Math.min(last, (hover ?? -1) + 1)
        : e.key === 'ArrowLeft'
          ? Math.max(0, (hover ?? last + 1) - 1)
          : e.key === 'Home'
            ? 0
            : e.key === 'End'
              ? last
              : null;
    if (next === null) return;
    e.preventDefault();
    setHover(next);
  };
  const h = hover === null ? null : (samples[hover] ?? null);

  const summary =
    `Memory and CPU over ${tLabel(xMax)}: peak ${mb(peak)} of the ${mb(limits.max_memory_mb)} limit; ` +
    `CPU up to ${cpuPeak.toFixed(1)} % against the ${limits.max_cpu_percent} % limit; ${throttled} of ${samples.length} ${samples.length === 1 ? 'sample' : 'samples'} throttled` +
    (events.length ? `; ${events.length} stream events.` : '.');

  return (
    <div className="tl">
      <div className="tl-top">
        <ul className="tl-legend" aria-label="Legend">
          <li>
            <i className="tl-sw tl-sw-mem" /> Memory
          </li>
          <li>
            <i className="tl-sw tl-sw-cpu" /> CPU
          </li>
          <li>
            <i className="tl-sw tl-sw-limit" /> Limit
          </li>
          <li>
            <i className="tl-sw tl-sw-thr" /> Throttled
          </li>
          {events.length > 0 && (
            <li>
              <i className="tl-sw tl-sw-ev" /> Stream events
            </li>
          )}
        </ul>
        <div className="inv-seg" role="group" aria-label="Vertical scale">
          <button type="button" aria-pressed={scale === 'limits'} onClick={() => setScale('limits')}>
            Against limits
          </button>
          <button type="button" aria-pressed={scale === 'usage'} onClick={() => setScale('usage')}>
            Fit to usage
          </button>
        </div>
      </div>
      <p className="tl-readout" data-testid="timeline-readout">
        {h ? (
          <>
            <strong>{tLabel(h.t_ms)}</strong> · memory {mb(h.memory_mb)} · CPU {h.cpu_percent.toFixed(1)} %
            {h.throttled && <span className="tl-thr-text"> · throttled</span>}
          </>
        ) : (
          <>
            Peak <strong>{mb(peak)}</strong> of {mb(limits.max_memory_mb)} · CPU up to <strong>{cpuPeak.toFixed(1)} %</strong> (limit{' '}
            {limits.max_cpu_percent} %) · {throttled} of {samples.length} {samples.length === 1 ? 'sample' : 'samples'} throttled
          </>
        )}
      </p>
      {samples.length < 3 && (
        <p className="muted tl-few" data-testid="timeline-few">
          {samples.length === 1 ? 'One sample' : `${samples.length} samples`}: the run was shorter than the ~50 ms sampling period, so the
          peak above comes from the run’s own measurement.
        </p>
      )}
      <div ref={wrapRef} className="tl-wrap">
        {width > 0 && (
          <svg
            className="tl-svg"
            data-testid="timeline-chart"
            width={width}
            height={height}
            viewBox={`0 0 ${width} ${height}`}
            role="img"
            aria-label={summary}
            tabIndex={0}
            onPointerMove={pick}
            onPointerLeave={() => setHover(null)}
            onKeyDown={key}
            onBlur={() => setHover(null)}
          >
            {/* panels */}
            <rect className="tl-panel" x={PAD_L} y={memTop} width={plotW} height={memH} />
            <rect className="tl-panel" x={PAD_L} y={cpuTop} width={plotW} height={cpuH} />
            <text className="tl-title" x={PAD_L} y={memTop - 6}>
              Memory (MB)
            </text>
            <text className="tl-title" x={PAD_L} y={cpuTop - 6}>
              CPU (% of one core)
            </text>

            {/* grid and y labels */}
            {memTicks.map((v) => (
              <g key={`m${v}`}>
                <line className="tl-grid" x1={PAD_L} x2={PAD_L + plotW} y1={yMem(v)} y2={yMem(v)} />
                <text className="tl-ylabel" x={PAD_L - 6} y={yMem(v) + 4}>
                  {v.toLocaleString('en-US')}
                </text>
              </g>
            ))}
            {cpuTicks.map((v) => (
              <g key={`c${v}`}>
                <line className="tl-grid" x1={PAD_L} x2={PAD_L + plotW} y1={yCpu(v)} y2={yCpu(v)} />
                <text className="tl-ylabel" x={PAD_L - 6} y={yCpu(v) + 4}>
                  {v.toLocaleString('en-US')}
                </text>
              </g>
            ))}
            {xTicks.map((t) => (
              <line key={`x${t}`} className="tl-grid tl-grid-x" x1={x(t)} x2={x(t)} y1={memTop} y2={cpuTop + cpuH} />
            ))}

            {/* throttled intervals, under the CPU line */}
            {samples.map((s, i) =>
              s.throttled ? (
                <rect
                  key={`tb${i}`}
                  className="tl-thr-band"
                  data-testid="throttled-mark"
                  x={x(samples[i - 1]?.t_ms ?? Math.max(0, s.t_ms - 50))}
                  y={cpuTop}
                  width={Math.max(2, x(s.t_ms) - x(samples[i - 1]?.t_ms ?? Math.max(0, s.t_ms - 50)))}
                  height={cpuH}
                >
                  <title>{`throttled at ${tLabel(s.t_ms)}`}</title>
                </rect>
              ) : null,
            )}

            {/* series */}
            {samples.length > 0 && (
              <>
                <path className="tl-mem-area" d={memArea} />
                <path className="tl-mem" d={memLine} data-testid="memory-line" />
                <path className="tl-cpu" d={cpuLine} data-testid="cpu-line" />
                {samples.map((s, i) =>
                  s.throttled ? <circle key={`td${i}`} className="tl-thr-dot" cx={x(s.t_ms)} cy={yCpu(s.cpu_percent)} r={3} /> : null,
                )}
                {samples.length < 3 &&
                  samples.map((s, i) => (
                    <g key={`few${i}`}>
                      <circle className="tl-mem-dot" cx={x(s.t_ms)} cy={yMem(s.memory_mb)} r={3.5} />
                      <circle className="tl-cpu-dot" cx={x(s.t_ms)} cy={yCpu(s.cpu_percent)} r={3} />
                    </g>
                  ))}
              </>
            )}

            {/* the limits */}
            {memLimitShown ? (
              <g data-testid="limit-memory" data-limit={limits.max_memory_mb}>
                <line
                  className="tl-limit tl-limit-mem"
                  x1={PAD_L}
                  x2={PAD_L + plotW}
                  y1={yMem(limits.max_memory_mb)}
                  y2={yMem(limits.max_memory_mb)}
                />
                <text className="tl-limit-label" x={PAD_L + plotW - 4} y={yMem(limits.max_memory_mb) - 5}>
                  limit {mb(limits.max_memory_mb)}
                </text>
              </g>
            ) : (
              <text
                className="tl-limit-label"
                data-testid="limit-memory"
                data-limit={limits.max_memory_mb}
                x={PAD_L + plotW - 4}
                y={memTop + 14}
              >
                limit {mb(limits.max_memory_mb)} ↑ (off scale)
              </text>
            )}
            {cpuLimitShown ? (
              <g data-testid="limit-cpu" data-limit={limits.max_cpu_percent}>
                <line
                  className="tl-limit tl-limit-cpu"
                  x1={PAD_L}
                  x2={PAD_L + plotW}
                  y1={yCpu(limits.max_cpu_percent)}
                  y2={yCpu(limits.max_cpu_percent)}
                />
                <text className="tl-limit-label" x={PAD_L + plotW - 4} y={yCpu(limits.max_cpu_percent) - 5}>
                  limit {limits.max_cpu_percent} %
                </text>
              </g>
            ) : (
              <text
                className="tl-limit-label"
                data-testid="limit-cpu"
                data-limit={limits.max_cpu_percent}
                x={PAD_L + plotW - 4}
                y={cpuTop + 14}
              >
                limit {limits.max_cpu_percent} % ↑ (off scale)
              </text>
            )}

            {/* stream events on the same time axis */}
            {events.length > 0 && (
              <g aria-hidden="true">
                <text className="tl-ylabel" x={PAD_L - 6} y={stripTop + STRIP / 2 + 2}>
                  events
                </text>
                <line className="tl-strip-base" x1={PAD_L} x2={PAD_L + plotW} y1={stripTop + STRIP / 2} y2={stripTop + STRIP / 2} />
                {events.map((e) => (
                  <line
                    key={e.id}
                    className={`tl-ev tl-ev-${e.event}`}
                    data-testid="event-tick"
                    data-event={e.event}
                    x1={x(e.t_ms)}
                    x2={x(e.t_ms)}
                    y1={stripTop + (e.event === 'chunk' ? 6 : 2)}
                    y2={stripTop + STRIP - (e.event === 'chunk' ? 6 : 2)}
                  >
                    <title>{`${e.event} #${e.id} at ${tLabel(e.t_ms)}${e.event === 'chunk' ? `: ${compact((e.data as { data?: unknown } | null)?.data, 60)}` : ''}`}</title>
                  </line>
                ))}
              </g>
            )}

            {/* x axis */}
            {xTicks.map((t) => (
              <text key={`xl${t}`} className="tl-xlabel" x={x(t)} y={axisTop + 15} textAnchor="middle">
                {tLabel(t)}
              </text>
            ))}

            {/* the sample under the pointer */}
            {h && (
              <g className="tl-hover" aria-hidden="true">
                <line x1={x(h.t_ms)} x2={x(h.t_ms)} y1={memTop} y2={axisTop} />
                <circle className="tl-hover-mem" cx={x(h.t_ms)} cy={yMem(h.memory_mb)} r={4} />
                <circle className="tl-hover-cpu" cx={x(h.t_ms)} cy={yCpu(h.cpu_percent)} r={4} />
              </g>
            )}
          </svg>
        )}
      </div>
      <details className="tl-samples">
        <summary>{samples.length === 1 ? 'The one sample' : `All ${samples.length} samples`}</summary>
        <div className="inv-table-scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">t</th>
                <th scope="col">Memory</th>
                <th scope="col">CPU</th>
                <th scope="col">Throttled</th>
              </tr>
            </thead>
            <tbody>
              {samples.map((s, i) => (
                <tr key={i}>
                  <td>{tLabel(s.t_ms)}</td>
                  <td>{mb(s.memory_mb)}</td>
                  <td>{s.cpu_percent.toFixed(1)} %</td>
                  <td>{s.throttled ? 'yes' : ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </details>
    </div>
  );
}
