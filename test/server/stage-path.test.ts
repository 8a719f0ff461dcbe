/**
 * The runner of the request path's stages (server/stages.ts `requestHandler`), over a real node
 * server with stages made for the test: `request` hooks in order until one finishes the exchange,
 * `answer` hooks in reverse for every stage reached, synchronous and asynchronous hooks alike; what
 * a stage throws goes to the nearest earlier `error` hook, and a defect no stage handles (or a failing
 * `answer` hook) is a 500 envelope while the outer stages still run.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { HttpError } from '../../server/errors.ts';
import { requestHandler } from '../../server/stages.ts';
import type { Stage } from '../../server/types.ts';
import { capturedLogger } from '../helpers/logs.ts';
import { nodeRequest } from '../helpers/raw-http.ts';

let server: Server | null = null;
afterEach(() => new Promise<void>((done) => (server ? server.close(() => done()) : done())));

/** Serve `stages` and answer one GET; the trace the stages left and the answer. */
async function run(stages: Stage[]) {
  const { log, lines } = capturedLogger();
  server = createServer(requestHandler(stages, log));
  await new Promise<void>((done) => server!.listen(0, '127.0.0.1', done));
  const answer = await nodeRequest((server.address() as AddressInfo).port, { path: '/' });
  await sleep(20);
  return { answer, json: JSON.parse(answer.body.toString() || 'null') as unknown, lines };
}

/** A stage that records its hooks in `trace`; `wait`: its hooks return promises; `fail`: the hook that throws. */
function traced(name: string, trace: string[], options: { wait?: boolean; fail?: 'request' | 'answer' } = {}): Stage {
  const step = (label: string, failing: boolean) => () => {
    trace.push(label);
    if (failing) throw new Error(`${name} failed${label.endsWith('out') ? ' on the way out' : ''}`);
  };
  const hook = (fn: () => void) =>
    options.wait
      ? async () => {
          await sleep(1);
          fn();
        }
      : fn;
  return { request: hook(step(`${name} in`, options.fail === 'request')), answer: hook(step(`${name} out`, options.fail === 'answer')) };
}

const writer: Stage = {
  answer(ex) {
    if (!ex.respond || ex.res.headersSent) return;
    ex.res.writeHead(ex.status, { 'Content-Type': 'application/json' });
    ex.res.end(JSON.stringify(ex.body));
  },
};
const answering = (body: object, finish = false): Stage => ({
  request(ex) {
    ex.body = body;
    ex.finished = finish;
  },
});
const envelope: Stage = {
  error(ex, err) {
    ex.status = err instanceof HttpError ? err.status : 500;
    ex.body = { caught: (err as Error).message };
  },
};

describe('the stage runner', () => {
  for (const wait of [false, true]) {
    it(`runs request hooks in order and answer hooks in reverse (${wait ? 'asynchronous' : 'synchronous'} hooks)`, async () => {
      const trace: string[] = [];
      const { json } = await run([writer, traced('a', trace, { wait }), traced('b', trace, { wait }), answering({ ok: 1 })]);
      expect(trace).toEqual(['a in', 'b in', 'b out', 'a out']);
      expect(json).toEqual({ ok: 1 });
    });

    it(`stops at a stage that finishes the exchange: later stages never run (${wait ? 'asynchronous' : 'synchronous'})`, async () => {
      const trace: string[] = [];
      const { json } = await run([writer, traced('a', trace, { wait }), answering({ early: true }, true), traced('late', trace)]);
      expect(trace).toEqual(['a in', 'a out']);
      expect(json).toEqual({ early: true });
    });

    it(`hands what a stage throws to the nearest earlier error hook, then unwinds (${wait ? 'asynchronous' : 'synchronous'})`, async () => {
      const trace: string[] = [];
      const { answer, json } = await run([
        writer,
        traced('outer', trace),
        envelope,
        traced('inner', trace, { wait }),
        traced('thrower', trace, { wait, fail: 'request' }),
      ]);
      expect(answer.status).toBe(500);
      expect(json).toEqual({ caught: 'thrower failed' });
      // The stages inside the error hook do not see the way out (as with try/catch around next()).
      expect(trace).toEqual(['outer in', 'inner in', 'thrower in', 'outer out']);
    });
  }

  it('answers a defect no stage handles with a 500 envelope, logged, and the outer stages still run', async () => {
    const trace: string[] = [];
    const { answer, json, lines } = await run([traced('outer', trace), traced('thrower', trace, { fail: 'request' })]);
    expect(answer.status).toBe(500);
    expect(json).toEqual({ errors: [{ message: 'Internal server error', extensions: { code: 'INTERNAL' } }] });
    expect(trace).toEqual(['outer in', 'thrower in', 'outer out']);
    expect(lines.filter((l) => l.msg === 'request path failed')).toHaveLength(1);
  });

  it('treats a failing answer hook as a defect and still runs the answer hooks outside it', async () => {
    const trace: string[] = [];
    const { answer, lines } = await run([traced('outer', trace), writer, traced('faulty', trace, { fail: 'answer' }), answering({ x: 1 })]);
    expect(answer.status).toBe(500);
    expect(trace).toEqual(['outer in', 'faulty in', 'faulty out', 'outer out']);
    expect(lines.filter((l) => l.msg === 'request path failed')).toHaveLength(1);
  });
});
