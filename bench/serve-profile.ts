/**
 * `BENCH_PROFILE=1 make bench-serve`: where a request's CPU goes, per middleware. The museum (and the
 * minimal Koa app beside it) run under V8's sampling profiler (`--cpu-prof`) through the slots and
 * slots 304 runs; each sample taken during a measured run (warm-ups and start-up left out, by the
 * profile's own timestamps) is charged to the innermost *middleware* on its stack — a museum source
 * file of the request path (server/middleware/*, the route table, the handler's files), or a
 * package that is itself a stage (Koa's application: createContext and respond; @koa/router;
 * koa-compose; koa-compress; pino and sonic-boom: the access line). Whatever a stage calls that is
 * no stage (Koa's ctx.set, prom-client, Negotiator, lru-cache…) is charged to it; what no stage is
 * on the stack of (the HTTP parser, sockets) is "node:http and sockets". Bundled frames are mapped
 * to their sources through dist/'s source maps (node:module's SourceMap).
 *
 * µs/request of a stage: its share of the run's samples × the run's CPU per request (/proc, as the
 * bench measures it, under the profiler: a few % above an unprofiled run).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** A measured run's window, in the profile's clock (CLOCK_MONOTONIC µs, as process.hrtime). */
export interface Window {
  fromUs: number;
  toUs: number;
}

/** Samples per stage, over some runs. */
export type StageSamples = Map<string, number>;

const STAGE_NAMES: Record<string, string> = {
  'server/middleware/request-id.ts': 'requestContext (X-Request-Id, client IP)',
  'server/middleware/observe.ts': 'observe (in flight, close listener, line fields)',
  'server/request-metrics.ts': 'request metrics (prom-client inc + observe)',
  'server/operations.ts': 'request metrics (prom-client inc + observe)',
  'server/middleware/guard.ts': 'closeWhileDraining',
  'server/middleware/cors.ts': 'cors',
  'server/middleware/compress.ts': 'compressResponses (negotiation)',
  'server/middleware/errors.ts': 'errorEnvelope',
  'server/route-table.ts': 'route stages (routed, input parse, send)',
  'bench/serve-rivals.ts': "the app's own middleware + handler",
  koa: 'Koa (createContext, respond, res.end)',
  '@koa/router': '@koa/router (match, layer dispatch)',
  'koa-compose': 'koa-compose (next)',
  'koa-compress': 'koa-compress',
  pino: 'pino access line (serialise + write)',
  'sonic-boom': 'pino access line (serialise + write)',
  'on-finished': 'on-finished (line trigger)',
};
/** The handler's own files: the slots response from memory, its ETag and 304. */
const HANDLER_FILES = ['server/routes/', 'server/snapshot-response.ts', 'server/http-conditional.ts', 'server/response.ts'];
const HANDLER = 'slots handler (rooms.ts, snapshot response, ETag/304)';
const NODE = 'node:http and sockets (parse, write)';
const GC = '(garbage collector)';
const NATIVE = '(program: V8/native, no JS frame)';

/** The package of a node_modules path (`@koa/router`, `koa`), and the file inside it. */
function packageOf(path: string): { name: string; file: string } | null {
  const at = path.lastIndexOf('node_modules/');
  if (at < 0) return null;
  const parts = path.slice(at + 'node_modules/'.length).split('/');
  const scoped = parts[0]!.startsWith('@');
  return { name: scoped ? `${parts[0]}/${parts[1]}` : parts[0]!, file: parts.slice(scoped ? 2 : 1).join('/') };
}

/** The stage a source file is (or null: it is charged to its caller). */
function stageOf(source: string, root: string): string | null {
  const pkg = packageOf(source);
  if (pkg) {
    if (pkg.name === 'koa') return pkg.file.endsWith('application.js') ? STAGE_NAMES.koa! : null;
    return STAGE_NAMES[pkg.name] ?? null;
  }
  const file = source.startsWith('/') ? relative(root, source) : source;
  if (HANDLER_FILES.some((prefix) => file.startsWith(prefix))) return HANDLER;
  // Any other source file of the server (its http.Server hooks, services): by its path.
  return STAGE_NAMES[file] ?? (file.startsWith('server/') ? file : null);
}

export class ProfileReader {
  private readonly maps = new Map<string, SourceMap | null>();

  constructor(private readonly root: string) {}

  /** The source file of a frame: through its bundle's source map, else its own path. */
  private sourceOf(frame: ProfileNode['callFrame']): string {
    if (!frame.url.startsWith('file://')) return frame.url;
    const path = fileURLToPath(frame.url);
    let map = this.maps.get(path);
    if (map === undefined) {
      try {
        map = new SourceMap(JSON.parse(readFileSync(`${path}.map`, 'utf8')));
      } catch {
        map = null;
      }
      this.maps.set(path, map);
    }
    if (!map) return path;
    const entry = map.findEntry(frame.lineNumber, frame.columnNumber) as { originalSource?: string };
    if (!entry.originalSource) return path;
    const original = entry.originalSource.startsWith('file://')
      ? fileURLToPath(entry.originalSource)
      : join(path, '..', entry.originalSource);
    return original;
  }

  /** A frame's source, short: repo-relative, or from the package's name on. */
  private shortSource(frame: ProfileNode['callFrame']): string {
    const source = this.sourceOf(frame);
    if (!source) return '(native)';
    const at = source.lastIndexOf('node_modules/');
    return at >= 0 ? source.slice(at + 'node_modules/'.length) : source.startsWith('/') ? relative(this.root, source) : source;
  }

  /**
   * The main thread's samples in `windows`, by stage (and by function, into `selfInto`): of the
   * process's profiles (each thread writes one: the manifest worker, tsx's loader thread), the one
   * with the most non-idle samples in the windows.
   */
  read(dir: string, windows: Window[], into: StageSamples, selfInto?: StageSamples): number {
    const files = readdirSync(dir).filter((name) => name.endsWith('.cpuprofile'));
    if (files.length === 0) throw new Error(`no .cpuprofile in ${dir}`);
    let best: { stages: StageSamples; self: StageSamples; kept: number } | null = null;
    for (const name of files) {
      const counted = this.count(JSON.parse(readFileSync(join(dir, name), 'utf8')) as CpuProfile, windows);
      if (!best || counted.kept > best.kept) best = counted;
    }
    for (const [key, n] of best!.stages) into.set(key, (into.get(key) ?? 0) + n);
    if (selfInto) for (const [key, n] of best!.self) selfInto.set(key, (selfInto.get(key) ?? 0) + n);
    return best!.kept;
  }

  /** One profile's non-idle samples in `windows`, by stage and by function. */
  private count(best: CpuProfile, windows: Window[]): { stages: StageSamples; self: StageSamples; kept: number } {
    const into: StageSamples = new Map();
    const selfInto: StageSamples = new Map();
    const byId = new Map(best.nodes.map((node) => [node.id, node]));
    const parent = new Map<number, number>();
    for (const node of best.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
    const stageOfNode = new Map<number, string | null>();
    const charged = (id: number): string | null => {
      const seen = stageOfNode.get(id);
      if (seen !== undefined) return seen;
      const node = byId.get(id)!;
      const name = node.callFrame.functionName;
      let stage: string | null;
      if (name === '(idle)' || name === '(root)') stage = null;
      else if (name === '(garbage collector)') stage = GC;
      else if (name === '(program)') stage = NATIVE;
      else stage = stageOf(this.sourceOf(node.callFrame), this.root);
      if (stage === null && name !== '(idle)' && name !== '(root)') {
        const up = parent.get(id);
        stage = up === undefined ? NODE : (charged(up) ?? NODE);
      }
      stageOfNode.set(id, stage);
      return stage;
    };
    let at = best.startTime;
    let kept = 0;
    for (let i = 0; i < best.samples.length; i++) {
      at += best.timeDeltas[i]!;
      if (!windows.some((w) => at >= w.fromUs && at <= w.toUs)) continue;
      const stage = charged(best.samples[i]!);
      if (stage === null) continue; // idle
      into.set(stage, (into.get(stage) ?? 0) + 1);
      const frame = byId.get(best.samples[i]!)!.callFrame;
      const key = `${frame.functionName || '(anonymous)'}  ${this.shortSource(frame)} → ${stage}`;
      selfInto.set(key, (selfInto.get(key) ?? 0) + 1);
      kept++;
    }
    return { stages: into, self: selfInto, kept };
  }
}

/** The table: per stage, µs/request (share × CPU/request) and share, for each app side by side. */
export function profileTable(title: string, sides: Array<{ name: string; samples: StageSamples; cpuUs: number }>): string[] {
  const stages = new Set<string>();
  for (const side of sides) for (const stage of side.samples.keys()) stages.add(stage);
  const totals = sides.map((side) => [...side.samples.values()].reduce((a, b) => a + b, 0));
  const order = [...stages].sort((a, b) => (sides[0]!.samples.get(b) ?? 0) - (sides[0]!.samples.get(a) ?? 0));
  const width = 52;
  const lines = ['', `${title}`, `${'stage'.padEnd(width)} ${sides.map((side) => `${side.name.padStart(12)} µs      %`).join('   ')}`];
  for (const stage of order) {
    const cells = sides.map((side, i) => {
      const n = side.samples.get(stage) ?? 0;
      const share = n / Math.max(1, totals[i]!);
      return `${(share * side.cpuUs).toFixed(1).padStart(15)} ${(share * 100).toFixed(1).padStart(6)}`;
    });
    lines.push(`${stage.padEnd(width)} ${cells.join('   ')}`);
  }
  lines.push(
    `${'total (CPU µs/request under the profiler)'.padEnd(width)} ${sides
      .map((side, i) => `${side.cpuUs.toFixed(1).padStart(15)} ${'100.0'.padStart(6)}`.concat(` (${totals[i]} samples)`))
      .join('   ')}`,
  );
  return lines;
}

/** The functions with the most samples of their own (self time), each with the stage it is charged to. */
export function hottestFunctions(title: string, samples: StageSamples, cpuUs: number, count = 15): string[] {
  const total = [...samples.values()].reduce((a, b) => a + b, 0);
  const top = [...samples].sort((a, b) => b[1] - a[1]).slice(0, count);
  return [
    '',
    title,
    ...top.map(([key, n]) => `${((n / total) * cpuUs).toFixed(1).padStart(7)} µs ${((n / total) * 100).toFixed(1).padStart(5)} %  ${key}`),
  ];
}
