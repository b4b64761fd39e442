// A LangGraph graph as its run went, drawn as LangGraph Studio draws it: top to bottom from `__start__` to
// `__end__`, conditional edges dashed, loops (an edge back to an earlier layer) as arcs on the side. Each node
// says how often it ran and in which steps of the sequence; the one running now pulses, the ones that ran
// are filled, the edges the run took are solid and coloured. Inline SVG, no layout library.
import type { AgentGraph } from '../../../contract/schemas/agent';

const NODE_W = 128;
const NODE_H = 34;
const GAP_X = 28;
const GAP_Y = 50;
const PAD = 18;
const LOOP = 26;

export interface NodeRun {
  /** 1-based positions of this node in the run's node sequence. */
  order: number[];
  active: boolean;
}

interface Placed {
  id: string;
  name: string;
  layer: number;
  x: number;
  y: number;
}

/**
 * Layers by longest path from `__start__` over the graph without its back edges (found by a depth-first walk
 * from the start, then from any node not reached), each layer's nodes in the order the graph lists them.
 */
export function layout(graph: AgentGraph): { nodes: Placed[]; back: Set<string>; width: number; height: number } {
  const ids = graph.nodes.map((n) => n.id);
  const out = new Map<string, string[]>(ids.map((id) => [id, []]));
  for (const e of graph.edges) if (out.has(e.from) && out.has(e.to)) out.get(e.from)!.push(e.to);
  const back = new Set<string>();
  const state = new Map<string, 1 | 2>();
  const visit = (id: string) => {
    state.set(id, 1);
    for (const to of out.get(id) ?? []) {
      if (state.get(to) === 1) back.add(`${id}>${to}`);
      else if (!state.has(to)) visit(to);
    }
    state.set(id, 2);
  };
  const start = ids.find((id) => id === '__start__') ?? ids[0];
  if (start !== undefined) visit(start);
  for (const id of ids) if (!state.has(id)) visit(id);

  const layer = new Map<string, number>(ids.map((id) => [id, 0]));
  // Longest path on the DAG that is left: relax |V| times (graphs here have a handful of nodes).
  for (let round = 0; round < ids.length; round++) {
    let changed = false;
    for (const e of graph.edges) {
      if (back.has(`${e.from}>${e.to}`) || !layer.has(e.from) || !layer.has(e.to)) continue;
      if (layer.get(e.to)! < layer.get(e.from)! + 1) {
        layer.set(e.to, layer.get(e.from)! + 1);
        changed = true;
      }
    }
    if (!changed) break;
  }
  // `__end__` sits below everything.
  const deepest = Math.max(0, ...[...layer.entries()].filter(([id]) => id !== '__end__').map(([, l]) => l));
  if (layer.has('__end__')) layer.set('__end__', Math.max(layer.get('__end__')!, deepest + 1));

  const rows = new Map<number, string[]>();
  for (const id of ids) rows.set(layer.get(id)!, [...(rows.get(layer.get(id)!) ?? []), id]);
  const widest = Math.max(1, ...[...rows.values()].map((r) => r.length));
  const width = PAD * 2 + widest * NODE_W + (widest - 1) * GAP_X + LOOP * 2;
  const layers = Math.max(0, ...rows.keys()) + 1;
  const height = PAD * 2 + layers * NODE_H + (layers - 1) * GAP_Y;
  const name = new Map(graph.nodes.map((n) => [n.id, n.name]));
  const nodes: Placed[] = [];
  for (const [l, row] of rows) {
    const rowW = row.length * NODE_W + (row.length - 1) * GAP_X;
    row.forEach((id, i) =>
      nodes.push({ id, name: name.get(id) ?? id, layer: l, x: (width - rowW) / 2 + i * (NODE_W + GAP_X), y: PAD + l * (NODE_H + GAP_Y) }),
    );
  }
  return { nodes, back, width, height };
}

const short = (s: string, max = 16) => (s.length > max ? `${s.slice(0, max - 1)}…` : s);

export function AgentGraphView({
  graph,
  runs,
  taken,
  live,
}: {
  graph: AgentGraph;
  /** By node id (= the node's name in LangGraph). */
  runs: Map<string, NodeRun>;
  /** Edges the run went along, as `from>to`. */
  taken: Set<string>;
  live: boolean;
}) {
  const { nodes, back, width, height } = layout(graph);
  const at = new Map(nodes.map((n) => [n.id, n]));
  const ran = [...runs.values()].filter((r) => r.order.length > 0).length;
  return (
    <figure className="agent-graph" data-testid="agent-graph">
      <svg
        viewBox={`0 0 ${width} ${height}`}
        width={width}
        style={{ maxWidth: '100%', height: 'auto' }}
        role="img"
        aria-label={`The graph: ${graph.nodes.length} nodes, ${graph.edges.length} edges; ${ran} nodes ran`}
      >
        <defs>
          <marker id="agent-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
            <path d="M0 0 L10 5 L0 10 z" className="agent-arrow" />
          </marker>
          <marker id="agent-arrow-on" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
            <path d="M0 0 L10 5 L0 10 z" className="agent-arrow agent-arrow-on" />
          </marker>
        </defs>
        {graph.edges.map((e, i) => {
          const a = at.get(e.from);
          const b = at.get(e.to);
          if (!a || !b) return null;
          const on = taken.has(`${e.from}>${e.to}`);
          let d: string;
          if (back.has(`${e.from}>${e.to}`) || b.layer <= a.layer) {
            // A loop back up: out of the source's right side, round, into the target's right side.
            const x1 = a.x + NODE_W;
            const y1 = a.y + NODE_H / 2;
            const x2 = b.x + NODE_W;
            const y2 = b.y + NODE_H / 2;
            const bend = Math.max(x1, x2) + LOOP;
            d = `M${x1} ${y1} C${bend} ${y1} ${bend} ${y2} ${x2 + 2} ${y2}`;
          } else {
            const x1 = a.x + NODE_W / 2;
            const y1 = a.y + NODE_H;
            const x2 = b.x + NODE_W / 2;
            const y2 = b.y - 2;
            const my = (y1 + y2) / 2;
            d = `M${x1} ${y1} C${x1} ${my} ${x2} ${my} ${x2} ${y2}`;
          }
          return (
            <path
              key={`${e.from}-${e.to}-${i}`}
              d={d}
              className={`agent-edge${e.conditional ? ' agent-edge-cond' : ''}${on ? ' agent-edge-on' : ''}`}
              markerEnd={on ? 'url(#agent-arrow-on)' : 'url(#agent-arrow)'}
              data-testid="agent-graph-edge"
              data-from={e.from}
              data-to={e.to}
              data-taken={on ? 'true' : 'false'}
            >
              <title>{`${e.from} → ${e.to}${e.conditional ? ' (conditional)' : ''}${on ? ', taken' : ''}`}</title>
            </path>
          );
        })}
        {nodes.map((n) => {
          const run = runs.get(n.id);
          const special = n.id === '__start__' || n.id === '__end__';
          const stateName = run?.active && live ? 'active' : run && run.order.length > 0 ? 'ran' : 'idle';
          return (
            <g
              key={n.id}
              className={`agent-node agent-node-${stateName}${special ? ' agent-node-special' : ''}`}
              data-testid="agent-graph-node"
              data-node={n.id}
              data-state={stateName}
              transform={`translate(${n.x} ${n.y})`}
            >
              <title>
                {special
                  ? n.name
                  : `${n.name}: ${run && run.order.length ? `ran ${run.order.length}× (step ${run.order.join(', ')})` : 'did not run'}`}
              </title>
              <rect className="agent-node-box" width={NODE_W} height={NODE_H} rx={special ? NODE_H / 2 : 7} />
              <text className="agent-node-name" x={NODE_W / 2} y={NODE_H / 2 + 4} textAnchor="middle">
                {short(n.name)}
              </text>
              {!special && run && run.order.length > 0 && (
                <g className="agent-node-badge" transform={`translate(${NODE_W - 14} -8)`}>
                  <rect width={26} height={17} rx={8.5} />
                  <text x={13} y={12.5} textAnchor="middle">{`${run.order.length}×`}</text>
                </g>
              )}
            </g>
          );
        })}
      </svg>
      <figcaption className="muted agent-small">
        Solid coloured edges: the path this run took{live ? ' so far' : ''}. Dashed: conditional edges.
      </figcaption>
    </figure>
  );
}
