/**
 * `museum bake …` commands: `sample`, `rooms`, `room` (and `sync`, contributed separately).
 * Results go to stdout (one JSON document with --json), progress and warnings to stderr.
 * The heavy modules are imported when a command runs, so `--help` stays instant.
 */
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { oneLine } from '../common/errors.ts';
import { printable } from '../common/terminal.ts';
import type { GcRemoval, GcSummary } from './gc.ts';
import type { BakeEvent, BakeSummary, RoomOutcome } from './pipeline.ts';
import { describeSlotChanges } from './slots/changes.ts';

const positiveInt = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${name} must be a positive integer`);
  return n;
};
const nonNegativeInt = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a non-negative integer`);
  return n;
};
const idList = (value: string) => {
  const ids = value
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean)
    .map(Number);
  if (!ids.length || ids.some((n) => !Number.isInteger(n) || n < 1))
    throw new InvalidArgumentError('expected comma-separated room ids, e.g. 1,4,7');
  return ids;
};

const formatBytes = (n: number): string =>
  n < 1024 ? `${n} B` : n < 1024 ** 2 ? `${(n / 1024).toFixed(1)} KB` : `${(n / 1024 ** 2).toFixed(1)} MB`;
const formatMs = (ms: number) => (ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`);
// Lines for people (not --json): whatever came from content is escaped (printable).
const out = (text: string) => process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
/** out(), waiting while stdout is full. */
const outPaced = async (text: string): Promise<void> => {
  if (!out(text)) await once(process.stdout, 'drain');
};
const err = (text: string) => process.stderr.write(text.endsWith('\n') ? text : `${text}\n`);

/** Where progress goes: stderr, or a test's stream. */
export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface ProgressReporter {
  onEvent(event: BakeEvent): void;
  /** Stop the clock and end the status line (after the run, also a failed one). */
  stop(): void;
}

/**
 * Progress on stderr. Each room that settles gets a line; the rooms in flight and for how long are
 * shown as a status line redrawn every second on a terminal, and as a plain line every `everyMs`
 * (default 10 s) otherwise (logs), so a long room is never silence.
 */
export function progressReporter(stream: ProgressStream, { everyMs = 10_000, now = () => performance.now() } = {}): ProgressReporter {
  const tty = Boolean(stream.isTTY);
  const inFlight = new Map<number, { title: string; since: number }>();
  let [done, total] = [0, 0];
  const flying = () => [...inFlight].map(([id, room]) => `room ${id} ${printable(room.title)} ${formatMs(now() - room.since)}`).join(', ');
  const status = () => {
    const width = 20;
    const filled = total ? Math.round((done / total) * width) : 0;
    const line = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${done}/${total}${inFlight.size ? ` · baking ${flying()}` : ''}`;
    const columns = stream.columns || 120; // 0 or unset: a pseudo-terminal without a size
    return line.length > columns - 1 ? `${line.slice(0, columns - 2)}…` : line;
  };
  // A terminal's status line is erased before each line above it and redrawn after.
  const write = (text: string) => stream.write(tty ? `\r\x1b[2K${text}${status()}` : text);
  const timer = setInterval(
    () => {
      if (tty) write('');
      else if (inFlight.size) stream.write(`bake: ${done}/${total} done, in flight: ${flying()}\n`);
    },
    tty ? 1_000 : everyMs,
  );
  timer.unref();
  return {
    onEvent(event) {
      if (event.type === 'plan') {
        total = event.total;
        return write(`bake: ${event.total} rooms, ${event.toBake} to bake\n`);
      }
      if (event.type === 'start') {
        inFlight.set(event.id, { title: event.title, since: now() });
        return tty ? write('') : undefined;
      }
      const { outcome } = event;
      ({ done, total } = event);
      inFlight.delete(outcome.id);
      const line =
        `${outcome.status.padEnd(7)} ` +
        `room ${outcome.id} ${printable(outcome.title)}${outcome.ms !== null ? ` (${formatMs(outcome.ms)})` : ''}${
          outcome.status === 'failed' ? `: ${printable(outcome.reason)}` : ''
        }`;
      // Unchanged rooms are listed only for small runs; the summary counts them anyway.
      if (outcome.status !== 'skipped' || total <= 50) write(`[${done}/${total}] ${line}\n`);
      else if (tty) write('');
    },
    stop() {
      clearInterval(timer);
      if (tty) stream.write('\r\x1b[2K');
    },
  };
}

/** JSON for --json: durations (`ms`, `*_ms`) as whole milliseconds, not float noise. */
export const jsonDocument = (value: unknown): string =>
  JSON.stringify(value, (key, v: unknown) => (typeof v === 'number' && (key === 'ms' || key.endsWith('_ms')) ? Math.round(v) : v));

/** Where the published QA report is: its file, and its URL on the server (PUBLIC_URL or the default). */
export function reportLocation(path: string, env: NodeJS.ProcessEnv = process.env): string {
  const base = env.PUBLIC_URL?.trim() ? env.PUBLIC_URL.trim().replace(/\/+$/, '') : `http://localhost:${env.PORT?.trim() || 8080}`;
  return `QA report: ${path} · served at ${base}/report`;
}

/** The summary for people; `reportPath`: the published QA report (this run's, or the one still served). */
export function summaryTable(summary: BakeSummary, reportPath: string | null = summary.report): string {
  const rows = summary.rooms.map((r: RoomOutcome) => [
    String(r.id),
    printable(r.title),
    r.status,
    r.slot_changes ? describeSlotChanges(r.slot_changes) : '',
    r.bytes_in !== null ? `${formatBytes(r.bytes_in)} → ${formatBytes(r.bytes_out ?? 0)}` : '',
    r.ms !== null ? formatMs(r.ms) : '',
    printable(r.status === 'failed' ? r.reason : r.status === 'skipped' ? r.reason : r.warnings.join('; ')),
  ]);
  const header = ['room', 'title', 'status', 'anchors vs previous bake', 'model in → out', 'time', 'notes'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  const total =
    `${summary.rooms.length} rooms: ${summary.baked} baked, ${summary.skipped} skipped, ${summary.failed} failed · ` +
    `${formatBytes(summary.bytes_in)} → ${formatBytes(summary.bytes_out)} · ${formatMs(summary.ms)} · ` +
    (summary.published ? `published ${summary.bake_id}` : 'nothing changed, manifest kept');
  const gc = summary.gc ? [gcLine(summary.gc)] : [];
  const report = reportPath ? [reportLocation(reportPath)] : [];
  return `${[line(header), ...rows.map(line), total, ...gc, ...report].join('\n')}\n`;
}

function gcLine(gc: GcSummary): string {
  return (
    `gc: ${gc.dry_run ? 'would remove' : 'removed'} ${gc.removed.length} files (${formatBytes(gc.removed_bytes)}); ` +
    `kept ${gc.kept_files} (${gc.in_grace} within the grace period) for manifests ${gc.kept_manifests.join(', ') || 'none'}` +
    (gc.pruned_manifests.length ? `; ${gc.dry_run ? 'would prune' : 'pruned'} ${gc.pruned_manifests.length} old manifests` : '') +
    (gc.removed_qa_facts.length ? `; ${gc.dry_run ? 'would remove' : 'removed'} ${gc.removed_qa_facts.length} stale QA facts` : '')
  );
}

function sampleCommand(): Command {
  return new Command('sample')
    .description('Write the sample content (rooms, images, collections, artworks), identical on every run')
    .option('--out <dir>', 'content directory to write', 'content')
    .option('--json', 'print one JSON document on stdout')
    .action(async (opts: { out: string; json?: boolean }) => {
      const { writeSampleContent } = await import('./sample/generate.ts');
      const dir = resolve(opts.out);
      const summary = await writeSampleContent(dir);
      if (opts.json) out(JSON.stringify({ dir, ...summary }));
      else
        out(`sample content written to ${dir}: ${summary.rooms} rooms, ${summary.collections} collections, ${summary.artworks} artworks`);
    });
}

interface RoomsOptions {
  out?: string;
  content?: string;
  force?: boolean;
  only?: number[];
  concurrency?: number;
  losslessNormals?: boolean;
  roomTimeout?: number;
  workerMemory?: number;
  workerRss?: number;
  gc?: boolean;
  json?: boolean;
}

function roomsCommand(): Command {
  return (
    new Command('rooms')
      .description('Bake every room of the content source into DATA_DIR (incremental, parallel) and publish the manifest')
      .option('--out <dir>', 'data directory (default: $DATA_DIR or ./data)')
      .option('--content <dir>', 'content directory (default: $CONTENT_DIR or ./content)')
      .option('--force', 'rebake every room even when nothing changed')
      .option('--only <ids>', 'bake only these room ids (comma-separated)', idList)
      .addOption(
        new Option('--concurrency <n>', 'rooms baked at once, each in its own worker process (default: number of cores)').argParser(
          positiveInt('--concurrency'),
        ),
      )
      .option('--lossless-normals', 'keep normal maps exact (lossless WebP) instead of lossy like the other textures')
      // Defaults as in BAKE_LIMITS (bake/settings.ts), not imported: --help stays instant.
      .addOption(
        new Option('--room-timeout <s>', 'fail a room still baking after this many seconds (default: 300)').argParser(
          positiveInt('--room-timeout'),
        ),
      )
      .addOption(
        new Option(
          '--worker-rss <mb>',
          'resident memory bound of each bake worker as a whole (heap, typed arrays, wasm) in MB; a room over it fails; 0: none ' +
            '(default: 2048; Linux only)',
        ).argParser(nonNegativeInt('--worker-rss')),
      )
      .addOption(
        new Option(
          '--worker-memory <mb>',
          'V8 heap limit of each bake worker in MB, part of --worker-rss and at most it; a room over it fails ' +
            '(default: 1536, or --worker-rss when lower)',
        ).argParser(positiveInt('--worker-memory')),
      )
      .option('--gc', 'after publishing, remove files no recent manifest references (as `bake gc` with its defaults)')
      .option('--json', 'print the summary as one JSON document on stdout')
      .action(async (opts: RoomsOptions) => {
        const [{ bakeRooms }, { withLosslessNormals }] = await Promise.all([import('./pipeline.ts'), import('./settings.ts')]);
        const progress = progressReporter(process.stderr);
        const summary = await bakeRooms({
          contentDir: opts.content ?? process.env.CONTENT_DIR ?? 'content',
          dataDir: opts.out ?? process.env.DATA_DIR ?? 'data',
          force: opts.force,
          only: opts.only,
          concurrency: opts.concurrency,
          roomTimeoutMs: opts.roomTimeout === undefined ? undefined : opts.roomTimeout * 1000,
          workerHeapMb: opts.workerMemory,
          workerRssMb: opts.workerRss,
          settings: withLosslessNormals(Boolean(opts.losslessNormals)),
          gc: opts.gc ? {} : undefined,
          onEvent: (event) => progress.onEvent(event),
        }).finally(() => progress.stop());
        if (opts.json) out(jsonDocument(summary));
        else {
          const { artifactPaths } = await import('../artifacts/format.ts');
          const served = artifactPaths(summary.data_dir).report;
          out(summaryTable(summary, summary.report ?? (existsSync(served) ? served : null)));
        }
        if (summary.failed > 0) process.exitCode = 1;
      })
  );
}

function roomCommand(): Command {
  return new Command('room')
    .description('Bake one model by hand (no manifest is published) and print the files written')
    .argument('<model>', 'model file (.glb or .gltf) or http(s) URL')
    .requiredOption('--room <id>', 'room id the slot data is for', positiveInt('--room'))
    .option('--slots <n>', 'onchain slot count (generated anchors when the model has no Slot_NNN nodes)', nonNegativeInt('--slots'), 0)
    .option('--image <file>', 'preview image (file or URL) for image and thumbnail')
    .addOption(new Option('--kind <kind>', 'room or sculpture (default: detected)').choices(['room', 'sculpture']))
    .option('--previous <file>', "the room's previously published slot JSON: its still-valid generated anchors keep their ids and poses")
    .option('--lossless-normals', 'keep normal maps exact (lossless WebP)')
    .requiredOption('--out <dir>', 'data directory to write files into')
    .option('--json', 'print one JSON document on stdout')
    .action(async (model: string, opts: RoomOptions, command: Command) => {
      try {
        await bakeOneRoom(model, opts, command);
      } catch (error) {
        // --json: one JSON document on stdout also when it fails (the one line still goes to stderr).
        if (opts.json && !(error instanceof CommanderError)) out(JSON.stringify({ room: opts.room, ok: false, error: oneLine(error) }));
        throw error;
      }
    });
}

interface RoomOptions {
  room: number;
  slots: number;
  image?: string;
  kind?: 'room' | 'sculpture';
  previous?: string;
  losslessNormals?: boolean;
  out: string;
  json?: boolean;
}

/** `bake room`: its steps on stderr as they begin, then the files written (or one JSON document). */
async function bakeOneRoom(model: string, opts: RoomOptions, command: Command): Promise<void> {
  const started = performance.now();
  const step = (what: string) => err(`bake room: ${what} (${formatMs(performance.now() - started)})`);
  const [
    { SourceResolver, modelFiles },
    { bakeRoom },
    { artifactPaths, filePath, readRoomSlotData },
    { withLosslessNormals },
    { readFile },
  ] = await Promise.all([
    import('./fetch.ts'),
    import('./room.ts'),
    import('../artifacts/format.ts'),
    import('./settings.ts'),
    import('node:fs/promises'),
  ]);
  let previousSlots = null;
  if (opts.previous) {
    const value: unknown = await readFile(opts.previous, 'utf8').then(JSON.parse, () => null);
    try {
      // No manifest beside it: slot data written before source_model existed is known for its source only.
      previousSlots = readRoomSlotData(value, null);
    } catch {
      // A usage error found by the action: commander prints it and exits with 2 (a thrown error would be silent).
      command.error(`error: --previous ${opts.previous} is not readable RoomSlotData`, { exitCode: 2 });
    }
  }
  const dataDir = resolve(opts.out);
  const resolver = new SourceResolver({ baseDir: process.cwd(), cacheDir: artifactPaths(dataDir).cache });
  step(`resolving ${printable(model)}`);
  const [source, image] = await Promise.all([resolver.resolveModel(model), opts.image ? resolver.resolveFile(opts.image) : null]);
  // The Basis encoder's wasm prints its progress with console.log: stdout holds only this command's output.
  const consoleLog = console.log;
  console.log = console.error;
  const result = await bakeRoom(
    {
      roomId: opts.room,
      onchainSlots: opts.slots,
      kind: opts.kind,
      model: modelFiles(source),
      image: image ? { path: image.path } : null,
      dataDir,
      settings: withLosslessNormals(Boolean(opts.losslessNormals)),
      previousSlots,
      planPicture: false, // only the QA report of `bake rooms` shows it
    },
    step,
  ).finally(() => {
    console.log = consoleLog;
  });
  step('done');
  await resolver.save().catch(() => undefined);
  const files = Object.fromEntries(
    (['model', 'model_optimized', 'image', 'thumbnail', 'slot_data'] as const).map((k) => {
      const ref = result[k];
      return [k, ref ? { ...ref, path: filePath(dataDir, ref) } : null];
    }),
  );
  const report = {
    room: result.roomId,
    kind: result.engine.kind,
    files,
    slot_summary: result.slot_summary,
    slot_changes: result.slotChanges,
    warnings: result.warnings,
    optimizer: { skipped: result.optimizer.skipped, steps: result.optimizer.steps.map((s) => ({ name: s.name, ms: Math.round(s.ms) })) },
    bytes_in: result.bytesIn,
    bytes_out: result.bytesOut,
    ms: Math.round(result.ms),
  };
  if (opts.json) {
    out(jsonDocument({ ok: true, ...report }));
    return;
  }
  for (const [name, file] of Object.entries(files)) if (file) out(`${name.padEnd(16)} ${file.path} (${formatBytes(file.bytes)})`);
  const s = result.slot_summary;
  out(`slots            ${s.count} (${s.authored} authored, ${s.generated} generated, ${s.flipped} flipped, ${s.ambiguous} ambiguous)`);
  if (result.slotChanges.had_previous) out(`anchors          ${describeSlotChanges(result.slotChanges)} against --previous`);
  out(`model            ${formatBytes(result.bytesIn)} → ${formatBytes(result.bytesOut)} in ${formatMs(result.ms)}`);
  for (const w of result.warnings) err(`warning: ${printable(w)}`);
}

function syncCommand(): Command {
  return new Command('sync')
    .description(
      'Pull collections, artworks and rooms (with model and preview files) from the content store (CONTENT_UPSTREAM_URL, ' +
        'CONTENT_UPSTREAM_TOKEN) into the content directory',
    )
    .option('--content <dir>', 'content directory to write (default: $CONTENT_DIR or ./content)')
    .option('--json', 'print the summary as one JSON document on stdout')
    .action(async (opts: { content?: string; json?: boolean }) => {
      const [{ contentStoreFromEnv }, { syncContent, SyncError }] = await Promise.all([import('../common/env.ts'), import('./sync.ts')]);
      const store = contentStoreFromEnv(process.env);
      if (!store) throw new SyncError('CONTENT_UPSTREAM_URL is not set: nothing to sync from');
      const summary = await syncContent({
        upstreamUrl: store.url,
        token: store.token,
        contentDir: opts.content ?? process.env.CONTENT_DIR ?? 'content',
        log: (line) => process.stderr.write(`${printable(line)}\n`),
      });
      for (const w of summary.warnings) process.stderr.write(`warning: ${printable(w)}\n`);
      if (opts.json) out(jsonDocument(summary));
      else {
        out(
          `synced ${summary.dir} from ${summary.upstream}: ${summary.collections} collections, ${summary.artworks} artworks` +
            `${summary.unlisted ? ` (${summary.unlisted} unlisted)` : ''}, ${summary.rooms} rooms; ` +
            `files ${summary.files.downloaded} downloaded, ${summary.files.reused} unchanged (${summary.ms} ms)`,
        );
      }
    });
}

function gcCommand(): Command {
  return new Command('gc')
    .description(
      'Remove files of DATA_DIR that none of the last published manifests references and that are older than the grace period (takes ' +
        'the bake lock)',
    )
    .option('--out <dir>', 'data directory (default: $DATA_DIR or ./data)')
    .addOption(new Option('--keep <n>', 'published manifests whose files are kept').default(3).argParser(positiveInt('--keep')))
    .option('--grace <duration>', 'keep files of manifests replaced, and files written, less than this ago (e.g. 30m, 1h, 2d)', '1h')
    .option('--dry-run', 'list what would be removed; remove nothing')
    .option('--json', 'print the summary as one JSON document on stdout')
    .action(async (opts: { out?: string; keep: number; grace: string; dryRun?: boolean; json?: boolean }, command: Command) => {
      const { collectGarbage, parseDuration } = await import('./gc.ts');
      let graceMs: number;
      try {
        graceMs = parseDuration(opts.grace);
      } catch (e) {
        return command.error(`error: --grace: ${(e as Error).message}`, { exitCode: 2 });
      }
      // Without --json, each removal is listed as it happens (after a kill, the output says what
      // went), at the pace stdout takes it: a slow reader does not make the output pile up in memory.
      const onRemove = opts.json
        ? undefined
        : (r: GcRemoval) => outPaced(`${opts.dryRun ? 'would remove' : 'removed'} ${r.path} (${formatBytes(r.bytes)})`);
      const summary = await collectGarbage(opts.out ?? process.env.DATA_DIR ?? 'data', {
        keep: opts.keep,
        graceMs,
        dryRun: opts.dryRun,
        onRemove,
      });
      out(opts.json ? jsonDocument(summary) : gcLine(summary));
    });
}

export function bakeCommand(): Command {
  return new Command('bake')
    .description('Bake room artifacts (optimized GLBs, slot anchors, thumbnails)')
    .addCommand(sampleCommand())
    .addCommand(roomsCommand())
    .addCommand(roomCommand())
    .addCommand(gcCommand())
    .addCommand(syncCommand());
}
