// The agent view's pure parts, under Node: which stream chunks spell text (agent-text.tsx) and how a
// LangGraph graph is laid out in layers with its loops found (agent-graph.tsx).
import { describe, expect, it } from 'vitest';
import { assembleChunks, chunkText } from '../../renderer/src/pages/agent-text';
import { layout } from '../../renderer/src/pages/agent-graph';

describe('assembled text', () => {
  it('reads a string, or token / text / delta / content (first found), or an OpenAI chat chunk; nothing else', () => {
    expect(chunkText('hi')).toBe('hi');
    expect(chunkText({ token: 'a', node: 'model' })).toBe('a');
    expect(chunkText({ text: 'b' })).toBe('b');
    expect(chunkText({ delta: 'c' })).toBe('c');
    expect(chunkText({ content: 'd' })).toBe('d');
    expect(chunkText({ token: 'first', text: 'second' })).toBe('first');
    expect(chunkText({ choices: [{ delta: { content: 'e' } }] })).toBe('e');
    expect(chunkText({ index: 0, word: 'one' })).toBeNull();
    expect(chunkText({ token: 3 })).toBeNull();
    expect(chunkText(null)).toBeNull();
    expect(chunkText(['x'])).toBeNull();
  });

  it('joins the text chunks in order and counts the others', () => {
    const a = assembleChunks([{ token: 'Tool' }, { token: ' said:' }, { progress: 0.5 }, ' sunny', { token: '' }]);
    expect(a).toEqual({ text: 'Tool said: sunny', used: 4, skipped: 1, example: { progress: 0.5 } });
  });
});

describe('graph layout', () => {
  const agent = {
    nodes: ['__start__', 'model', 'tools', '__end__'].map((id) => ({ id, name: id })),
    edges: [
      { from: '__start__', to: 'model', conditional: false },
      { from: 'model', to: '__end__', conditional: true },
      { from: 'model', to: 'tools', conditional: true },
      { from: 'tools', to: 'model', conditional: true },
    ],
  };

  it('puts create_agent’s graph in layers, start on top and end at the bottom, and finds the loop back', () => {
    const { nodes, back } = layout(agent);
    expect(Object.fromEntries(nodes.map((n) => [n.id, n.layer]))).toEqual({ __start__: 0, model: 1, tools: 2, __end__: 3 });
    expect([...back]).toEqual(['tools>model']);
  });

  it('spreads parallel nodes across one layer without overlap', () => {
    const fan = {
      nodes: ['__start__', 'a', 'b', 'c', '__end__'].map((id) => ({ id, name: id })),
      edges: [
        ...['a', 'b', 'c'].map((to) => ({ from: '__start__', to, conditional: false })),
        ...['a', 'b', 'c'].map((from) => ({ from, to: '__end__', conditional: false })),
      ],
    };
    const { nodes, width } = layout(fan);
    const row = nodes.filter((n) => n.layer === 1).sort((p, q) => p.x - q.x);
    expect(row.map((n) => n.id)).toEqual(['a', 'b', 'c']);
    for (let i = 1; i < row.length; i++) expect(row[i]!.x).toBeGreaterThanOrEqual(row[i - 1]!.x + 128);
    expect(row.at(-1)!.x + 128).toBeLessThanOrEqual(width);
  });
});
