/**
 * The registry of responses in flight (server/request-metrics.ts InFlight): what the graceful
 * shutdown waits for and the gauges count. An array with each response's index on it, so these pin
 * the bookkeeping a Set did for free: membership, size, removal in any order, no double entries, and
 * walking while responses leave.
 */
import { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { InFlight, MuseumResponse } from '../../server/request-metrics.ts';
import { mulberry32 } from '../../common/random.ts';

const response = () => new MuseumResponse(new IncomingMessage(new Socket()));

describe('InFlight', () => {
  it('holds each response once, counts them, and forgets them in any order', () => {
    const registry = new InFlight();
    const [a, b, c] = [response(), response(), response()];
    for (const res of [a, b, c, b]) registry.add(res);
    expect(registry.size).toBe(3);
    registry.delete(a); // the first: the last one moves into its place
    expect(new Set(registry)).toEqual(new Set([b, c]));
    registry.delete(a); // already gone: nothing changes
    registry.delete(c);
    expect([...registry]).toEqual([b]);
    registry.delete(b);
    expect(registry.size).toBe(0);
    registry.add(a); // a response can come back (it never does, but nothing breaks)
    expect([...registry]).toEqual([a]);
  });

  it('stays exact over a random mix of arrivals and departures', () => {
    const registry = new InFlight();
    const reference = new Set<MuseumResponse>();
    const pool = Array.from({ length: 40 }, response);
    const random = mulberry32(7);
    for (let step = 0; step < 5_000; step++) {
      const res = pool[Math.floor(random() * pool.length)]!;
      if (random() < 0.5) {
        registry.add(res);
        reference.add(res);
      } else {
        registry.delete(res);
        reference.delete(res);
      }
      expect(registry.size).toBe(reference.size);
    }
    expect(new Set(registry)).toEqual(reference);
  });

  it('walks a copy: responses ended while it walks leave without skipping the others', () => {
    const registry = new InFlight();
    const all = Array.from({ length: 6 }, response);
    for (const res of all) registry.add(res);
    const seen: MuseumResponse[] = [];
    for (const res of registry) {
      seen.push(res);
      registry.delete(res);
    }
    expect(new Set(seen)).toEqual(new Set(all));
    expect(registry.size).toBe(0);
  });
});

describe('MuseumResponse', () => {
  it("passes node's constructor options on and starts untracked, unlabelled, timed", () => {
    const before = performance.now();
    // node constructs responses as (req, { highWaterMark, … }): the subclass must not drop the options.
    const res = new MuseumResponse(new IncomingMessage(new Socket()), { highWaterMark: 1234 });
    expect(res.writableHighWaterMark).toBe(1234);
    expect(res.startedAt).toBeGreaterThanOrEqual(before);
    expect(res.startedAt).toBeLessThanOrEqual(performance.now());
    expect([res.route, res.tracker, res.inFlightAt]).toEqual([undefined, null, -1]);
  });
});
