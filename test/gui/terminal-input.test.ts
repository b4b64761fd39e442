// The Terminal page's keystroke queue, under Node: keys typed within a few ms go in one POST, a POST in
// flight holds back the next (which then carries everything typed meanwhile), order always holds, big
// pastes are cut below the core's 64 Ki limit without splitting a character, and close() sends no more.
import { describe, expect, it } from 'vitest';
import { InputQueue } from '../../renderer/src/pages/terminal-input';

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

function recorder(latencyMs = 0) {
  const sent: string[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const send = async (data: string) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    sent.push(data);
    await tick(latencyMs);
    inFlight--;
  };
  return { sent, send, maxInFlight: () => maxInFlight };
}

describe('InputQueue', () => {
  it('coalesces keys typed within the delay into one send', async () => {
    const r = recorder();
    const q = new InputQueue(r.send, () => {}, 5);
    for (const c of 'echo hi\r') q.push(c);
    await tick(30);
    expect(r.sent).toEqual(['echo hi\r']);
  });

  it('sends one at a time, in order, the keys typed during a send going together next', async () => {
    const r = recorder(40);
    const q = new InputQueue(r.send, () => {}, 2);
    q.push('a');
    await tick(10); // 'a' is in flight
    q.push('b');
    q.push('c');
    await tick(10);
    q.push('d');
    await tick(150);
    expect(r.sent).toEqual(['a', 'bcd']);
    expect(r.maxInFlight()).toBe(1);
  });

  it('cuts a big paste into chunks under the limit, never between the halves of a surrogate pair', async () => {
    const r = recorder();
    const q = new InputQueue(r.send, () => {}, 1);
    const paste = 'x'.repeat(16 * 1024 - 1) + '😀' + 'y'.repeat(40_000);
    q.push(paste);
    await tick(50);
    expect(r.sent.join('')).toBe(paste);
    expect(r.sent.length).toBeGreaterThan(2);
    for (const chunk of r.sent) {
      expect(chunk.length).toBeLessThanOrEqual(16 * 1024);
      expect(/[\uD800-\uDBFF]$/.test(chunk)).toBe(false);
    }
  });

  it('reports a failed send and goes on; after close() nothing is sent', async () => {
    const errors: unknown[] = [];
    const sent: string[] = [];
    const q = new InputQueue(
      async (d) => {
        sent.push(d);
        if (d === 'bad') throw new Error('refused');
      },
      (e) => errors.push(e),
      1,
    );
    q.push('bad');
    await tick(20);
    q.push('good');
    await tick(20);
    expect(sent).toEqual(['bad', 'good']);
    expect(errors).toHaveLength(1);
    q.push('late');
    q.close();
    q.push('later');
    await tick(20);
    expect(sent).toEqual(['bad', 'good']);
  });
});
