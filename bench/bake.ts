/**
 * `make bench-bake`: the room bake against `gltf-transform optimize IN OUT --compress draco
 * --texture-compress webp` on the same inputs, in one run.
 *
 *  1. Per input (the sample rooms, ../shared/assets/rooms/*.glb and textured/*):
 *     - the CLI, one process per file;
 *     - our whole room bake (optimize + slots + thumbnail) as `museum bake room` (one process per file);
 *     - our room bake warm, in this process (how `bake rooms` runs it on its main thread or a worker);
 *     time ratio, size ratio and peak RSS.
 *     Targets on the real models (../shared/assets): median time ratio ≤ 1.0×, every size ≤ 1.05×
 *     the CLI's or within 256 bytes of it. Normal maps: angular error (p50/p99/max, degrees) of the
 *     decoded optimized texture against the source, ours and the CLI's.
 *  2. A batch of rooms (sample + shared rooms, four times over), `museum bake rooms --force`
 *     with concurrency 1 vs 2, interleaved (target ≥ 1.25×), and the CPU time each spends; the
 *     machine's measured ceiling: two CPU-bound processes side by side against one after the other;
 *     and the headroom: the cores a serial bake leaves idle (it runs image work beside the engine).
 *     `BENCH_BAKE_ONLY=batch` runs this part alone.
 *  3. A no-op re-bake of 100 unchanged rooms (target < 1 s), in-process and as a CLI process.
 *  4. The model variants (meshopt, plain): each real room's bake with them against without them,
 *     warm (target: extra ≤ 0.3× the Draco-only bake), and each variant's bytes, br and gzip.
 *     `BENCH_BAKE_ONLY=variants` runs this part alone.
 *  5. Each real room as `bake rooms` bakes it, alone in its worker process (a fresh pool per run), with
 *     the worker's resident memory bound (default 2 GB) and without it (0), interleaved: the worker's
 *     peak RSS (VmHWM, from the pool), the bound's cost in bake time, and the room's step times as
 *     its worker reports them: the navmesh's share of the room's bake time (target ≤ 0.2×) and the
 *     ktx2 variant's Basis encode's share. `BENCH_BAKE_ONLY=workers` runs this part alone.
 * Times are the fastest of the repeats (BENCH_REPEATS, default 2; 5 for the batch): the machine is
 * shared, and the fastest run is the least disturbed. Results: a table on stdout and .bench/bake.json.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { readFile, utimes, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { SourceResolver } from '../bake/fetch.ts';
import { readModel, readModelFile, writeGlb } from '../bake/gltf-io.ts';
import { normalMapAngularError } from '../bake/normal-error.ts';
import { bakeRooms } from '../bake/pipeline.ts';
import { bakeRoom } from '../bake/room.ts';
import { writeSampleContent } from '../bake/sample/generate.ts';
import { RoomBuilder } from '../bake/sample/room-builder.ts';
import { RSS_POLL_MS } from '../bake/workers.ts';
import { median } from './stats.ts';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const SHARED = resolve(ROOT, '../shared/assets');
const WORK = join(ROOT, '.bench', 'bake');
const CLI = join(ROOT, 'node_modules/.bin/gltf-transform');
const MUSEUM = join(ROOT, 'bin/museum.js');
// Every spawned Node process reports its peak RSS (KB) and CPU time (all threads, µs) on stderr when
// it exits (preloaded module).
const RSS_PROBE_FILE = join(WORK, 'rss-probe.mjs');
const RSS_PROBE = `--import=${pathToFileURL(RSS_PROBE_FILE).href}`;
const RSS_PROBE_SOURCE =
  `process.on('exit', () => { const u = process.resourceUsage(); process.stderr.write('@@maxrss=' + u.maxRSS + ` +
  `' @@cpu=' + (u.userCPUTime + u.systemCPUTime) + '\\n'); });\n`;

interface Input {
  name: string;
  path: string;
  slots: number;
  image: string;
}

interface Timed {
  ms: number;
  rssMb: number | null;
  /** CPU time of the whole process (every thread), ms. */
  cpuMs: number | null;
  bytes: number;
}

function run(command: string, args: string[], outFile?: string): Timed & { stdout: string } {
  const started = performance.now();
  const child = spawnSync(command, args, {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, NODE_OPTIONS: RSS_PROBE },
    maxBuffer: 64 << 20,
  });
  const ms = performance.now() - started;
  if (child.status !== 0) throw new Error(`${basename(command)} ${args.join(' ')} failed: ${child.stderr.slice(-500)}`);
  const rss = /@@maxrss=(\d+)/.exec(child.stderr);
  const cpu = /@@cpu=(\d+)/.exec(child.stderr);
  return {
    ms,
    rssMb: rss ? Number(rss[1]) / 1024 : null,
    cpuMs: cpu ? Number(cpu[1]) / 1000 : null,
    bytes: outFile ? statSync(outFile).size : 0,
    stdout: child.stdout,
  };
}

// The machine is shared: the fastest of the repeats is the run least disturbed by others.
const best = (xs: number[]) => Math.min(...xs);
const kb = (n: number) => `${(n / 1024).toFixed(0)} KB`;
const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const angles = (e: { p50: number; p99: number; max: number } | null) =>
  e ? `${e.p50.toFixed(2)}/${e.p99.toFixed(2)}/${e.max.toFixed(1)}` : '–';

/** Angular error of every normal map of `optimized` against the same material's source texture. */
async function normalErrors(sourcePath: string, optimizedGlb: Uint8Array): Promise<{ p50: number; p99: number; max: number } | null> {
  const source = await readModelFile(sourcePath);
  const optimized = await readModel(optimizedGlb);
  const sourceNormals = source
    .getRoot()
    .listMaterials()
    .map((m) => m.getNormalTexture()?.getImage() ?? null);
  const optimizedNormals = optimized
    .getRoot()
    .listMaterials()
    .map((m) => m.getNormalTexture()?.getImage() ?? null);
  const errors = [];
  for (const [i, src] of sourceNormals.entries()) {
    const out = optimizedNormals[i];
    if (src && out) errors.push(await normalMapAngularError(src, out));
  }
  if (!errors.length) return null;
  return {
    p50: Math.max(...errors.map((e) => e.p50)),
    p99: Math.max(...errors.map((e) => e.p99)),
    max: Math.max(...errors.map((e) => e.max)),
  };
}

/** What two lanes can gain on this machine now: two CPU-bound processes (fixed work) together vs in turn. */
function ceiling(): number {
  const work = 'let x = 0; for (let i = 0; i < 4e8; i++) x += Math.sqrt(i); if (x < 0) console.log(x);';
  const serialRuns: number[] = [];
  const parallelRuns: number[] = [];
  for (let r = 0; r < 3; r++) {
    let t = performance.now();
    spawnSync(process.execPath, ['-e', work]);
    spawnSync(process.execPath, ['-e', work]);
    serialRuns.push(performance.now() - t);
    t = performance.now();
    spawnSync('bash', ['-c', `"${process.execPath}" -e '${work}' & "${process.execPath}" -e '${work}' & wait`]);
    parallelRuns.push(performance.now() - t);
  }
  return median(serialRuns) / median(parallelRuns);
}

async function inputs(sampleDir: string): Promise<Input[]> {
  const sample = JSON.parse(await readFile(join(sampleDir, 'rooms.json'), 'utf8')) as Array<{
    model: string;
    image: string;
    slots: number;
  }>;
  const preview = join(sampleDir, sample[0]!.image);
  const shared: Input[] = [
    ...readdirSync(join(SHARED, 'rooms'))
      .filter((f) => f.endsWith('.glb'))
      .sort()
      .map((f) => ({ name: f, path: join(SHARED, 'rooms', f), slots: 8, image: preview })),
    ...readdirSync(join(SHARED, 'textured'))
      .sort()
      .map((f) => {
        const path = join(SHARED, 'textured', f);
        const file = statSync(path).isDirectory() ? join(path, readdirSync(path).find((x) => x.endsWith('.gltf'))!) : path;
        return { name: basename(file), path: file, slots: 4, image: preview };
      }),
  ];
  return [
    ...sample.map((r) => ({ name: basename(r.model), path: join(sampleDir, r.model), slots: r.slots, image: join(sampleDir, r.image) })),
    ...shared,
  ];
}

async function perInput(list: Input[], repeats: number) {
  const rows = [];
  const warmDir = join(WORK, 'warm');
  const resolver = new SourceResolver({ baseDir: ROOT, cacheDir: join(warmDir, 'cache') });
  // Warm this process once (codecs, BVH code paths) so the in-process figure is steady-state.
  await bakeRoom({ roomId: 1, onchainSlots: list[0]!.slots, model: { path: list[0]!.path, resources: {} }, image: null, dataDir: warmDir });
  for (const [i, input] of list.entries()) {
    const cliOut = join(WORK, 'cli', `${i}.glb`);
    mkdirSync(join(WORK, 'cli'), { recursive: true });
    const cli: Timed[] = [];
    const ours: Timed[] = [];
    const warm: number[] = [];
    let lastOptimized = '';
    for (let r = 0; r < repeats; r++) {
      cli.push(run(CLI, ['optimize', input.path, cliOut, '--compress', 'draco', '--texture-compress', 'webp'], cliOut));
      const out = join(WORK, 'ours', String(i));
      rmSync(out, { recursive: true, force: true });
      const ourRun = run(process.execPath, [
        MUSEUM,
        'bake',
        'room',
        input.path,
        '--room',
        String(i + 1),
        '--slots',
        String(input.slots),
        '--image',
        input.image,
        '--out',
        out,
        '--json',
      ]);
      // The document is the last line: `bake room` runs the Basis encoder in its own process, whose wasm
      // prints "Total slices: …" on stdout for textured models (enableDebug off or not).
      const report = JSON.parse(ourRun.stdout.trimEnd().split('\n').at(-1)!) as {
        bytes_out: number;
        files: { model_optimized: { path: string } };
      };
      lastOptimized = report.files.model_optimized.path;
      ours.push({ ...ourRun, bytes: report.bytes_out });
      const model = await resolver.resolveModel(input.path);
      const resources = Object.fromEntries(Object.entries(model.resources).map(([uri, f]) => [uri, f.path]));
      const t = performance.now();
      await bakeRoom({
        roomId: i + 1,
        onchainSlots: input.slots,
        model: { path: model.main.path, resources },
        image: { path: input.image },
        dataDir: warmDir,
      });
      warm.push(performance.now() - t);
    }
    const ourGlb = await readFile(lastOptimized);
    const row = {
      input: input.name,
      real: input.path.startsWith(SHARED),
      normal_error: { ours: await normalErrors(input.path, ourGlb), cli: await normalErrors(input.path, await readFile(cliOut)) },
      source_bytes: statSync(input.path).size,
      cli: { ms: best(cli.map((c) => c.ms)), bytes: cli[0]!.bytes, rss_mb: median(cli.map((c) => c.rssMb ?? 0)) },
      ours_process: { ms: best(ours.map((c) => c.ms)), bytes: ours[0]!.bytes, rss_mb: median(ours.map((c) => c.rssMb ?? 0)) },
      ours_warm_ms: best(warm),
    };
    rows.push(row);
    process.stderr.write(
      `  ${input.name}: cli ${s(row.cli.ms)} ${kb(row.cli.bytes)} · ours ${s(row.ours_process.ms)} ` +
        `(warm ${s(row.ours_warm_ms)}) ${kb(row.ours_process.bytes)}\n`,
    );
  }
  return rows;
}

/** Rooms (the sample rooms and ../shared/assets/rooms) four times over, as `museum bake rooms` processes. */
async function batch(list: Input[], repeats: number) {
  const content = join(WORK, 'batch-content');
  mkdirSync(content, { recursive: true });
  const roomInputs = list.filter((i) => !i.path.includes(`${SHARED}/textured`));
  const rooms = Array.from({ length: 4 }, () => roomInputs)
    .flat()
    .map((input, i) => ({ id: i + 1, title: input.name, slots: input.slots, token_id: i + 1, model: input.path, image: input.image }));
  await writeFile(join(content, 'rooms.json'), JSON.stringify(rooms));
  const time = (concurrency: number) => {
    const data = join(WORK, `batch-data-${concurrency}`);
    rmSync(data, { recursive: true, force: true });
    const result = run(process.execPath, [
      MUSEUM,
      'bake',
      'rooms',
      '--content',
      content,
      '--out',
      data,
      '--concurrency',
      String(concurrency),
      '--force',
      '--json',
    ]);
    const summary = JSON.parse(result.stdout) as { failed: number };
    if (summary.failed) throw new Error(`batch failed: ${result.stdout.slice(0, 500)}`);
    return result;
  };
  time(2); // warm the file cache and tsx's transform cache
  const serial: Timed[] = [];
  const parallel: Timed[] = [];
  // Interleaved, so each serial run has a concurrency-2 neighbour that met the same host load.
  for (let r = 0; r < Math.max(repeats, 5); r++) {
    serial.push(time(1));
    parallel.push(time(2));
  }
  const ms = (runs: Timed[]) => runs.map((r) => r.ms);
  // CPU of the whole process (every thread): what two lanes cost beyond one shows here, not in the
  // wall time alone.
  const cpu = (runs: Timed[]) => median(runs.map((r) => r.cpuMs ?? 0));
  const cores = (runs: Timed[]) => median(runs.map((r) => (r.cpuMs ?? 0) / r.ms));
  return {
    rooms: rooms.length,
    ceiling: ceiling(),
    serial_ms: best(ms(serial)),
    concurrency2_ms: best(ms(parallel)),
    speedup: best(ms(serial)) / best(ms(parallel)),
    paired_speedup: median(serial.map((run, i) => run.ms / parallel[i]!.ms)),
    serial_runs_ms: ms(serial),
    concurrency2_runs_ms: ms(parallel),
    serial_cpu_ms: cpu(serial),
    concurrency2_cpu_ms: cpu(parallel),
    serial_cores: cores(serial),
    concurrency2_cores: cores(parallel),
    // What a second lane can gain at most when one lane already keeps `serial_cores` busy: the
    // cores left over (the pure-CPU ceiling assumes a serial run uses exactly one), and that again
    // at the CPU time two lanes were measured to cost.
    headroom: Math.min(2, availableParallelism()) / cores(serial),
    headroom_at_measured_cpu: Math.min(2, availableParallelism()) / cores(serial) / (cpu(parallel) / cpu(serial)),
  };
}

/** The real rooms of ../shared/assets/rooms: one folder per room with its .gltf (or a .glb beside them). */
function realRooms(): Array<{ name: string; path: string }> {
  const dir = join(SHARED, 'rooms');
  return readdirSync(dir)
    .sort()
    .flatMap((entry) => {
      const path = join(dir, entry);
      if (!statSync(path).isDirectory()) return /\.(glb|gltf)$/.test(entry) ? [{ name: entry, path }] : [];
      const model = readdirSync(path).find((f) => /\.(glb|gltf)$/.test(f));
      return model ? [{ name: entry, path: join(path, model) }] : [];
    });
}

/**
 * 4. What the model variants cost the bake (issue 36): each real room baked warm in this process with
 * and without the meshopt and plain variants, interleaved, the fastest of the repeats each; extra
 * time ÷ the Draco-only bake (target ≤ 0.3×). Both bakes write the .br/.gz siblings of their files.
 */
async function variantCost(repeats: number) {
  const dir = join(WORK, 'variants');
  const resolver = new SourceResolver({ baseDir: ROOT, cacheDir: join(dir, 'cache') });
  const rows = [];
  for (const [i, room] of realRooms().entries()) {
    const model = await resolver.resolveModel(room.path);
    const resources = Object.fromEntries(Object.entries(model.resources).map(([uri, f]) => [uri, f.path]));
    const job = (modelVariants: boolean, r: number) => ({
      roomId: i + 1,
      onchainSlots: 8,
      model: { path: model.main.path, resources },
      image: null,
      planPicture: false,
      modelVariants,
      dataDir: join(dir, `${i}-${modelVariants ? 'all' : 'draco'}-${r}`),
    });
    await bakeRoom(job(true, -1)); // warm: codecs and this room's code paths
    const times = { draco: [] as number[], all: [] as number[] };
    // CPU time of the whole process (every thread): others' load on this shared machine moves it far less than wall time.
    const cpu = { draco: [] as number[], all: [] as number[] };
    let last: Awaited<ReturnType<typeof bakeRoom>> | null = null;
    for (let r = 0; r < repeats; r++) {
      for (const withVariants of [false, true]) {
        const [t, c] = [performance.now(), process.cpuUsage()];
        const result = await bakeRoom(job(withVariants, r));
        times[withVariants ? 'all' : 'draco'].push(performance.now() - t);
        const used = process.cpuUsage(c);
        cpu[withVariants ? 'all' : 'draco'].push((used.user + used.system) / 1000);
        if (withVariants) last = result;
      }
    }
    const wire = async (ref: { sha256: string; ext: string }, suffix: string) =>
      statSync(join(dir, `${i}-all-0`, 'files', `${ref.sha256}.${ref.ext}${suffix}`), { throwIfNoEntry: false })?.size ?? null;
    const variants = [];
    for (const v of last!.model_variants)
      variants.push({
        name: v.name,
        bytes: v.file.bytes,
        br: await wire(v.file, '.br'),
        gz: await wire(v.file, '.gz'),
        max_texture_size: v.max_texture_size,
      });
    const [draco, all] = [best(times.draco), best(times.all)];
    const [dracoCpu, allCpu] = [median(cpu.draco), median(cpu.all)];
    rows.push({
      room: room.name,
      draco_only_ms: draco,
      with_variants_ms: all,
      extra_ratio: (all - draco) / draco,
      draco_only_cpu_ms: dracoCpu,
      with_variants_cpu_ms: allCpu,
      extra_cpu_ratio: (allCpu - dracoCpu) / dracoCpu,
      variants_ms: last!.variantsMs,
      variants,
    });
    process.stderr.write(
      `  ${room.name}: draco only ${s(draco)}, with variants ${s(all)} → extra ${((all - draco) / draco).toFixed(2)}×\n`,
    );
  }
  return rows;
}

/** 5. Each real room alone in a fresh worker, bound on and off (see the header). */
async function workerRooms(repeats: number) {
  const dir = join(WORK, 'workers');
  const rows = [];
  for (const [i, room] of realRooms().entries()) {
    const content = join(dir, `content-${i}`);
    mkdirSync(content, { recursive: true });
    await writeFile(
      join(content, 'rooms.json'),
      JSON.stringify([{ id: i + 1, title: room.name, slots: 8, token_id: i + 1, model: room.path, image: null }]),
    );
    const runs = { bounded: [] as RoomRun[], unbounded: [] as RoomRun[] };
    const once = async (bounded: boolean, r: number): Promise<RoomRun> => {
      const t = performance.now();
      const summary = await bakeRooms({
        contentDir: content,
        dataDir: join(dir, `data-${i}-${bounded ? 'on' : 'off'}-${r}`),
        concurrency: 1,
        force: true,
        workerRssMb: bounded ? undefined : 0,
      });
      const outcome = summary.rooms[0]!;
      if (outcome.status !== 'baked' || !outcome.steps) throw new Error(`${room.name}: ${outcome.reason}`);
      return { run_ms: performance.now() - t, room_ms: outcome.ms!, peak_rss_mb: outcome.peak_rss_mb, steps: outcome.steps };
    };
    await once(true, -1); // warm the file cache and tsx's transform cache
    for (let r = 0; r < repeats; r++) {
      // Alternating which goes first: neither always meets the other's leftovers.
      for (const bounded of r % 2 ? [false, true] : [true, false]) runs[bounded ? 'bounded' : 'unbounded'].push(await once(bounded, r));
    }
    const fastest = (list: RoomRun[]) => list.reduce((a, b) => (b.room_ms < a.room_ms ? b : a));
    const on = fastest(runs.bounded);
    const peak = (list: RoomRun[]) => Math.max(...list.map((x) => x.peak_rss_mb ?? 0));
    const row = {
      room: room.name,
      bounded_room_ms: on.room_ms,
      unbounded_room_ms: fastest(runs.unbounded).room_ms,
      bounded_run_ms: best(runs.bounded.map((x) => x.run_ms)),
      unbounded_run_ms: best(runs.unbounded.map((x) => x.run_ms)),
      paired_cost: median(runs.bounded.map((x, k) => x.room_ms / runs.unbounded[k]!.room_ms)) - 1,
      peak_rss_mb: { bounded: peak(runs.bounded), unbounded: peak(runs.unbounded) },
      steps: on.steps,
      navmesh_share: on.steps.navmesh_ms / on.room_ms,
      ktx2_share: on.steps.ktx2_encode_ms === null ? null : on.steps.ktx2_encode_ms / on.room_ms,
      // Shares in every run, to see how much they move on this shared machine.
      navmesh_shares: [...runs.bounded, ...runs.unbounded].map((x) => x.steps.navmesh_ms / x.room_ms),
      ktx2_shares: [...runs.bounded, ...runs.unbounded].map((x) => (x.steps.ktx2_encode_ms ?? 0) / x.room_ms),
    };
    rows.push(row);
    process.stderr.write(
      `  ${room.name}: ${s(row.bounded_room_ms)} bounded / ${s(row.unbounded_room_ms)} not, peak RSS ` +
        `${row.peak_rss_mb.bounded.toFixed(0)} MB; navmesh ${row.navmesh_share.toFixed(2)}×, ktx2 ${row.ktx2_share?.toFixed(2) ?? '–'}×\n`,
    );
  }
  return rows;
}
interface RoomRun {
  run_ms: number;
  room_ms: number;
  peak_rss_mb: number | null;
  steps: NonNullable<Awaited<ReturnType<typeof bakeRooms>>['rooms'][number]['steps']>;
}

/** What one read of the bound's poll costs (bake/workers.ts reads /proc/<pid>/status every RSS_POLL_MS), µs. */
function pollReadUs(): number | null {
  if (!existsSync('/proc/self/status')) return null;
  const reads = 5_000;
  const t = performance.now();
  for (let i = 0; i < reads; i++) readFileSync('/proc/self/status', 'latin1');
  return ((performance.now() - t) / reads) * 1000;
}

/** The rooms-in-their-worker rows: peak RSS, the bound's cost, the navmesh's and the ktx2 encode's shares. */
function workerLines(rows: Awaited<ReturnType<typeof workerRooms>>): string[] {
  const share = (x: number | null) => (x === null ? '–' : `${x.toFixed(2)}×`);
  const range = (xs: number[]) => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`;
  const readUs = pollReadUs();
  return [
    readUs === null
      ? 'no /proc: the resident bound is not enforced here'
      : `the bound's poll: ${readUs.toFixed(0)} µs per read every ${RSS_POLL_MS} ms = ${((readUs / 1000 / RSS_POLL_MS) * 100).toFixed(2)} % of ` +
        "one of the parent's cores per worker (the worker's own time is not touched)",
    '',
    'real rooms alone in their worker (`bake rooms`, concurrency 1, fresh pool per run; fastest room time of the repeats):',
    ...rows.flatMap((r) => [
      `  ${r.room}: room ${s(r.bounded_room_ms)} with the 2 GB resident bound, ${s(r.unbounded_room_ms)} without ` +
        `(paired median ${(r.paired_cost * 100).toFixed(1)} %; whole run ${s(r.bounded_run_ms)} vs ${s(r.unbounded_run_ms)}); ` +
        `worker peak RSS ${r.peak_rss_mb.bounded.toFixed(0)} MB bounded, ${r.peak_rss_mb.unbounded.toFixed(0)} MB unbounded`,
      `    navmesh ${r.steps.navmesh_ms.toFixed(0)} ms = ${share(r.navmesh_share)} of the room (target ≤ 0.2×; runs ${range(r.navmesh_shares)}); ` +
        `ktx2 encode ${r.steps.ktx2_encode_ms?.toFixed(0) ?? '–'} ms = ${share(r.ktx2_share)} (runs ${range(r.ktx2_shares)}); ` +
        `read ${r.steps.read_ms.toFixed(0)}, anchors ${r.steps.anchors_ms.toFixed(0)}, textures ${r.steps.textures_ms.toFixed(0)}, ` +
        `optimize + variants ${r.steps.optimize_ms.toFixed(0)} ms`,
    ]),
  ];
}

async function noop() {
  const content = join(WORK, 'noop-content');
  const data = join(WORK, 'noop-data');
  rmSync(content, { recursive: true, force: true });
  rmSync(data, { recursive: true, force: true });
  mkdirSync(join(content, 'models'), { recursive: true });
  const rooms = [];
  const past = new Date(Date.now() - 3_600_000);
  for (let i = 1; i <= 100; i++) {
    const b = new RoomBuilder(`Room${i}`);
    const wall = b.material('Wall');
    const w = 3 + (i % 7);
    b.floorAndCeiling('Room', [-w, -3], [w, 3], 3, b.material('Floor'), b.material('Ceiling'));
    b.wall('North', [w, -3], [-w, -3], 3, 0.2, wall);
    b.wall('South', [-w, 3], [w, 3], 3, 0.2, wall);
    b.slot('Slot_001', { center: [0, 1.5, -2.89], normal: [0, 0, 1], up: [0, 1, 0], width: 1, height: 0.8 });
    const model = join(content, 'models', `room-${i}.glb`);
    await writeFile(model, await writeGlb(b.document));
    await utimes(model, past, past); // content files are normally old; fresh ones are re-hashed (racy stat)
    rooms.push({ id: i, title: `Room ${i}`, slots: 1, token_id: i, model: `models/room-${i}.glb`, image: null });
  }
  await writeFile(join(content, 'rooms.json'), JSON.stringify(rooms));
  const first = performance.now();
  await bakeRooms({ contentDir: content, dataDir: data, concurrency: availableParallelism() });
  const fullMs = performance.now() - first;
  const inProcess: number[] = [];
  for (let r = 0; r < 3; r++) {
    const t = performance.now();
    const summary = await bakeRooms({ contentDir: content, dataDir: data });
    inProcess.push(performance.now() - t);
    if (summary.baked !== 0 || summary.skipped !== 100) throw new Error('no-op re-bake rebuilt rooms');
  }
  const cli = [0, 1, 2].map(() => run(process.execPath, [MUSEUM, 'bake', 'rooms', '--content', content, '--out', data, '--json']).ms);
  const help = [0, 1, 2].map(() => run(process.execPath, [MUSEUM, '--help']).ms);
  return { rooms: 100, first_bake_ms: fullMs, in_process_ms: best(inProcess), cli_process_ms: best(cli), cli_help_ms: best(help) };
}

/** The model variants' rows: bake time with and without them, and each variant's bytes (file, br, gzip). */
function variantLines(rows: Awaited<ReturnType<typeof variantCost>>): string[] {
  const bytes = (n: number | null) => (n === null ? '–' : kb(n));
  return [
    '',
    'model variants (warm, in-process; fastest of the repeats): extra bake time ÷ the Draco-only bake (target ≤ 0.3×)',
    ...rows.flatMap((r) => [
      `  ${r.room}: draco only ${s(r.draco_only_ms)}, with meshopt + plain ${s(r.with_variants_ms)} → ${r.extra_ratio.toFixed(2)}×;` +
        ` CPU (median) ${s(r.draco_only_cpu_ms)} → ${s(r.with_variants_cpu_ms)}, ${r.extra_cpu_ratio.toFixed(2)}×` +
        ` (meshopt ${(r.variants_ms.meshopt ?? 0).toFixed(0)} ms, plain ${(r.variants_ms.plain ?? 0).toFixed(0)} ms from the prepared ` +
        `document)`,
      ...r.variants.map(
        (v) =>
          `    ${v.name.padEnd(7)} ${bytes(v.bytes).padStart(8)}  br ${bytes(v.br).padStart(8)}  gzip ${bytes(v.gz).padStart(8)}  ` +
          `textures ≤ ${v.max_texture_size ?? '–'} px`,
      ),
    ]),
    `  median extra: time ${median(rows.map((r) => r.extra_ratio)).toFixed(2)}×, ` +
      `CPU ${median(rows.map((r) => r.extra_cpu_ratio)).toFixed(2)}×`,
  ];
}

type InputRow = Awaited<ReturnType<typeof perInput>>[number];

/** Each input's row (time, size, normal error, RSS: ours against the CLI's) and the real models' summary. */
function perInputLines(rows: InputRow[]) {
  const table = [
    [
      'input',
      'source',
      'CLI time',
      'ours (process)',
      'ours (warm)',
      'time ratio',
      'warm ratio',
      'CLI size',
      'our size',
      'size ratio',
      'normal error ours (p50/p99/max °)',
      'CLI',
      'CLI RSS',
      'our RSS',
    ],
    ...rows.map((r) => [
      r.input,
      kb(r.source_bytes),
      s(r.cli.ms),
      s(r.ours_process.ms),
      s(r.ours_warm_ms),
      (r.ours_process.ms / r.cli.ms).toFixed(2),
      (r.ours_warm_ms / r.cli.ms).toFixed(2),
      kb(r.cli.bytes),
      kb(r.ours_process.bytes),
      (r.ours_process.bytes / r.cli.bytes).toFixed(2),
      angles(r.normal_error.ours),
      angles(r.normal_error.cli),
      `${r.cli.rss_mb.toFixed(0)} MB`,
      `${r.ours_process.rss_mb.toFixed(0)} MB`,
    ]),
  ];
  const real = rows.filter((r) => r.real);
  const medianRatio = median(real.map((r) => r.ours_process.ms / r.cli.ms));
  const sizeMisses = real.filter((r) => !(r.ours_process.bytes <= 1.05 * r.cli.bytes || r.ours_process.bytes - r.cli.bytes <= 256));
  const widths = table[0]!.map((_, c) => Math.max(...table.map((row) => row[c]!.length)));
  const lines = table.map((row) => row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  '));
  lines.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('  '));
  lines.push(
    '',
    `real models (${real.length}): median time ratio ${medianRatio.toFixed(2)}× (target ≤ 1.0×); ` +
      `sizes ${
        sizeMisses.length
          ? `over ` +
            `target: ${sizeMisses
              .map((r) => `${r.input} ${(r.ours_process.bytes / r.cli.bytes).toFixed(3)}× ` + `(+${r.ours_process.bytes - r.cli.bytes} B)`)
              .join(', ')}`
          : 'all ≤ 1.05× or within 256 B of the CLI'
      }`,
  );
  return { lines, medianRatio, sizeMisses };
}

/** The batch's concurrency gain, its CPU, and the headroom a serial bake leaves. */
function batchLines(batchResult: Awaited<ReturnType<typeof batch>>): string[] {
  return [
    `batch of ${batchResult.rooms} rooms: serial ${s(batchResult.serial_ms)}, concurrency 2 ${s(batchResult.concurrency2_ms)} ` +
      `→ ${batchResult.speedup.toFixed(2)}×, median of paired runs ${batchResult.paired_speedup.toFixed(2)}× (target ≥ 1.25×; the ` +
      `machine's ceiling now ${batchResult.ceiling.toFixed(2)}×; runs ${batchResult.serial_runs_ms.map(s).join(' ')} ` +
      `vs ${batchResult.concurrency2_runs_ms.map(s).join(' ')})`,
    `  CPU time, all threads (medians): serial ${s(batchResult.serial_cpu_ms)} on ${batchResult.serial_cores.toFixed(2)} cores; ` +
      `concurrency 2 ${s(batchResult.concurrency2_cpu_ms)} on ${batchResult.concurrency2_cores.toFixed(2)} cores ` +
      `= ${(batchResult.concurrency2_cpu_ms / batchResult.serial_cpu_ms).toFixed(2)}× the serial CPU`,
    `  headroom: one lane already keeps ${batchResult.serial_cores.toFixed(2)} cores busy, so a second can gain at ` +
      `most ${batchResult.headroom.toFixed(2)}× here, ${batchResult.headroom_at_measured_cpu.toFixed(2)}× at the CPU two lanes cost`,
  ];
}

function noopLine(noopResult: Awaited<ReturnType<typeof noop>>): string {
  return (
    `no-op re-bake of ${noopResult.rooms} rooms: ${s(noopResult.in_process_ms)} in-process, ${s(noopResult.cli_process_ms)} as a CLI ` +
    `process, of which ${s(noopResult.cli_help_ms)} is \`museum --help\` start-up (target < 1 s; first ` +
    `bake ${s(noopResult.first_bake_ms)})`
  );
}

/** The CLI as it ships: bundled (with a stale bundle bin/museum.js would run the sources). */
function buildBundle(): void {
  const env = { ...process.env, MUSEUM_BUILD_STRICT: '1' };
  if (spawnSync(process.execPath, [join(ROOT, 'scripts/build.mjs')], { stdio: 'inherit', env }).status !== 0) {
    throw new Error('scripts/build.mjs failed');
  }
}

async function main() {
  const repeats = Number(process.env.BENCH_REPEATS ?? 2);
  if (!existsSync(CLI)) throw new Error('node_modules/.bin/gltf-transform is missing: run npm ci');
  rmSync(WORK, { recursive: true, force: true });
  mkdirSync(WORK, { recursive: true });
  if (process.env.BENCH_BAKE_ONLY === 'variants') {
    process.stdout.write(`${variantLines(await variantCost(Math.max(repeats, 5))).join('\n')}\n`);
    return;
  }
  if (process.env.BENCH_BAKE_ONLY === 'batch') {
    buildBundle();
    await writeFile(RSS_PROBE_FILE, RSS_PROBE_SOURCE);
    await writeSampleContent(join(WORK, 'sample'));
    process.stdout.write(`${batchLines(await batch(await inputs(join(WORK, 'sample')), repeats)).join('\n')}\n`);
    return;
  }
  if (process.env.BENCH_BAKE_ONLY === 'workers') {
    const workers = await workerRooms(Math.max(repeats, 3));
    process.stdout.write(`${workerLines(workers).join('\n')}\n`);
    await writeFile(join(ROOT, '.bench', 'bake-workers.json'), JSON.stringify(workers, null, 1));
    return;
  }
  buildBundle();
  await writeFile(RSS_PROBE_FILE, RSS_PROBE_SOURCE);
  const sampleDir = join(WORK, 'sample');
  await writeSampleContent(sampleDir);
  const list = await inputs(sampleDir);

  process.stderr.write(`bench-bake: ${list.length} inputs, ${repeats} runs each (fastest kept), ${availableParallelism()} cores\n`);
  const rows = await perInput(list, repeats);
  process.stderr.write('bench-bake: batch, concurrency 1 vs 2\n');
  const batchResult = await batch(list, repeats);
  process.stderr.write('bench-bake: no-op re-bake of 100 rooms\n');
  const noopResult = await noop();
  process.stderr.write('bench-bake: model variants, with and without\n');
  const variantRows = await variantCost(Math.max(repeats, 5));
  process.stderr.write('bench-bake: real rooms in their worker, resident bound on and off\n');
  const workerRows = await workerRooms(Math.max(repeats, 3));

  const { lines, medianRatio, sizeMisses } = perInputLines(rows);
  lines.push(...batchLines(batchResult), noopLine(noopResult), ...variantLines(variantRows), ...workerLines(workerRows));
  process.stdout.write(`${lines.join('\n')}\n`);
  await writeFile(
    join(ROOT, '.bench', 'bake.json'),
    JSON.stringify(
      {
        rows,
        median_time_ratio_real: medianRatio,
        size_misses: sizeMisses.map((r) => r.input),
        batch: batchResult,
        noop: noopResult,
        variants: variantRows,
        workers: workerRows,
      },
      null,
      1,
    ),
  );
}

await main();
