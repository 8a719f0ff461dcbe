/**
 * Reading and writing glTF models: ONE configured NodeIO (every extension; Draco and meshopt
 * codecs) shared by the bake and the slot engine.
 *
 * Models come from untrusted places, so the container is checked before glTF-Transform sees it:
 * GLB header and chunks, JSON, and every buffer / bufferView / accessor range against the bytes
 * that really exist. A broken file fails with one clear line (ModelError) instead of a RangeError
 * from deep inside a parser.
 */
import { promises as fs } from 'node:fs';
import { dirname, isAbsolute, relative, resolve as resolvePath, sep } from 'node:path';
import { BufferUtils, Format, GLB_BUFFER, Logger, NodeIO, VertexLayout } from '@gltf-transform/core';
import type { Document, GLTF, JSONDocument } from '@gltf-transform/core';
import { oneLine } from '../common/errors.ts';
import { BAKE_LIMITS } from './settings.ts';

/** A model that cannot be read; the message is one line meant for operators. */
export class ModelError extends Error {
  override name = 'ModelError';
}

/** Loads an external resource (buffer or image) referenced by a .gltf, by its URI as written. */
export type ResourceLoader = (uri: string) => Promise<Uint8Array>;

// The codecs are WebAssembly modules that take a while to instantiate: each is created once per
// thread, the first time a model needs it (most rooms never need a Draco or meshopt decoder).
type Codec = 'draco3d.decoder' | 'draco3d.encoder' | 'meshopt.decoder' | 'meshopt.encoder';
const CODECS: Record<Codec, () => Promise<unknown>> = {
  'draco3d.decoder': async () => (await import('draco3dgltf')).default.createDecoderModule(),
  'draco3d.encoder': async () => (await import('draco3dgltf')).default.createEncoderModule(),
  'meshopt.decoder': async () => {
    const { MeshoptDecoder } = await import('meshoptimizer');
    await MeshoptDecoder.ready;
    return MeshoptDecoder;
  },
  'meshopt.encoder': async () => {
    const { MeshoptEncoder } = await import('meshoptimizer');
    await MeshoptEncoder.ready;
    return MeshoptEncoder;
  },
};
const codecs = new Map<Codec, Promise<unknown>>();
let ioPromise: Promise<NodeIO> | null = null;

async function ioWith(needed: Codec[]): Promise<NodeIO> {
  ioPromise ??= (async () => {
    const { ALL_EXTENSIONS } = await import('@gltf-transform/extensions');
    // Warnings of the libraries would interleave with progress output; real problems throw.
    return new NodeIO().setLogger(new Logger(Logger.Verbosity.ERROR)).registerExtensions(ALL_EXTENSIONS);
  })();
  const io = await ioPromise;
  for (const name of needed) io.registerDependencies({ [name]: await codec(name) });
  return io;
}

/** The codec module of this thread, instantiated the first time it is asked for. */
function codec(name: Codec): Promise<unknown> {
  if (!codecs.has(name)) codecs.set(name, CODECS[name]());
  return codecs.get(name)!;
}

/** The configured NodeIO of this thread, with every codec registered. */
export function getIO(): Promise<NodeIO> {
  return ioWith(Object.keys(CODECS) as Codec[]);
}

const codecsFor = (extensions: readonly string[], direction: 'decoder' | 'encoder'): Codec[] => [
  ...(extensions.includes('KHR_draco_mesh_compression') ? [`draco3d.${direction}` as const] : []),
  ...(extensions.includes('EXT_meshopt_compression') ? [`meshopt.${direction}` as const] : []),
];

const GLB_MAGIC = 0x46546c67; // 'glTF'
const CHUNK_JSON = 0x4e4f534a; // 'JSON'
const CHUNK_BIN = 0x004e4942; // 'BIN\0'

export const isGlb = (bytes: Uint8Array): boolean =>
  bytes.byteLength >= 4 && new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true) === GLB_MAGIC;

function parseJson(bytes: Uint8Array, what: string): GLTF.IGLTF {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (err) {
    throw new ModelError(`${what} is not valid JSON (${oneLine(err)})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ModelError(`${what} is not a JSON object`);
  const json = value as GLTF.IGLTF;
  if (typeof json.asset?.version !== 'string' || !json.asset.version.startsWith('2.')) {
    throw new ModelError(`${what} is not glTF 2.0 (asset.version is ${JSON.stringify(json.asset?.version ?? null)})`);
  }
  return json;
}

const showMagic = (bytes: Uint8Array) =>
  Buffer.from(bytes.subarray(0, 4))
    .toString('latin1')
    .replace(/[^\x20-\x7e]/g, '?');

/** Split a GLB (magic already checked) into its JSON and BIN chunk, checking every length against the real byte count. */
function splitGlb(bytes: Uint8Array): { json: GLTF.IGLTF; bin: Uint8Array | null } {
  const size = bytes.byteLength;
  if (size < 12) throw new ModelError(`truncated GLB: ${size} bytes, shorter than the 12-byte header`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, size);
  const version = view.getUint32(4, true);
  if (version !== 2) throw new ModelError(`unsupported GLB version ${version} (only 2 is supported)`);
  const declared = view.getUint32(8, true);
  if (declared > size) throw new ModelError(`truncated GLB: header declares ${declared} bytes but the file has ${size}`);
  if (size < 20) throw new ModelError('truncated GLB: no JSON chunk after the header');
  const jsonLength = view.getUint32(12, true);
  if (view.getUint32(16, true) !== CHUNK_JSON) throw new ModelError('invalid GLB: the first chunk is not JSON');
  if (20 + jsonLength > declared) {
    throw new ModelError(`truncated GLB: JSON chunk of ${jsonLength} bytes runs past the end of the file (${declared} bytes)`);
  }
  const json = parseJson(bytes.subarray(20, 20 + jsonLength), 'GLB JSON chunk');
  let offset = 20 + jsonLength;
  let bin: Uint8Array | null = null;
  while (offset + 8 <= declared) {
    const length = view.getUint32(offset, true);
    const type = view.getUint32(offset + 4, true);
    if (offset + 8 + length > declared) {
      throw new ModelError(`truncated GLB: chunk at byte ${offset} declares ${length} bytes, past the end of the file`);
    }
    if (type === CHUNK_BIN && bin === null) bin = bytes.subarray(offset + 8, offset + 8 + length);
    offset += 8 + length;
  }
  return { json, bin };
}

const COMPONENT_BYTES: Record<number, number> = { 5120: 1, 5121: 1, 5122: 2, 5123: 2, 5125: 4, 5126: 4 };
const TYPE_COMPONENTS: Record<string, number> = { SCALAR: 1, VEC2: 2, VEC3: 3, VEC4: 4, MAT2: 4, MAT3: 9, MAT4: 16 };

interface MeshoptViewExt {
  buffer: number;
  byteOffset?: number;
  byteLength: number;
}

/** Check every declared range against the bytes that really exist, naming the first offender. */
function checkRanges(json: GLTF.IGLTF, bufferBytes: Array<number | null>): void {
  const buffers = json.buffers ?? [];
  buffers.forEach((buffer, i) => {
    const real = bufferBytes[i];
    if (real === null || real === undefined) return; // meshopt fallback buffer: no data by design
    if (buffer.byteLength > real) {
      throw new ModelError(`buffer ${i} declares ${buffer.byteLength} bytes but only ${real} exist (buffer past the end of the file)`);
    }
  });
  const bufferLength = (index: number, what: string): number => {
    const buffer = buffers[index];
    if (!buffer) throw new ModelError(`${what} refers to buffer ${index}, which does not exist`);
    return buffer.byteLength;
  };
  const views = json.bufferViews ?? [];
  views.forEach((view, i) => {
    const meshopt = (view.extensions as Record<string, MeshoptViewExt> | undefined)?.EXT_meshopt_compression;
    const ranges: Array<[number, number, number]> = [[view.buffer, view.byteOffset ?? 0, view.byteLength]];
    if (meshopt) ranges.push([meshopt.buffer, meshopt.byteOffset ?? 0, meshopt.byteLength]);
    for (const [buffer, start, length] of ranges) {
      const available = bufferLength(buffer, `bufferView ${i}`);
      const isFallback = bufferBytes[buffer] === null;
      if (!isFallback && start + length > available) {
        throw new ModelError(`bufferView ${i} ends at byte ${start + length}, past the end of buffer ${buffer} (${available} bytes)`);
      }
    }
  });
  const checkAccessorRange = (what: string, viewIndex: number, offset: number, count: number, elementBytes: number, stride?: number) => {
    const view = views[viewIndex];
    if (!view) throw new ModelError(`${what} refers to bufferView ${viewIndex}, which does not exist`);
    if (count === 0) return;
    const step = stride ?? view.byteStride ?? elementBytes;
    const end = offset + (count - 1) * step + elementBytes;
    if (end > view.byteLength) {
      throw new ModelError(`${what} needs ${end} bytes but bufferView ${viewIndex} has ${view.byteLength}`);
    }
  };
  (json.accessors ?? []).forEach((accessor, i) => {
    const componentBytes = COMPONENT_BYTES[accessor.componentType];
    const components = TYPE_COMPONENTS[accessor.type];
    if (!componentBytes || !components)
      throw new ModelError(`accessor ${i} has an invalid type ${accessor.type}/${accessor.componentType}`);
    if (!Number.isSafeInteger(accessor.count) || accessor.count < 0)
      throw new ModelError(`accessor ${i} has an invalid count ${JSON.stringify(accessor.count)}`);
    if (accessor.bufferView !== undefined) {
      checkAccessorRange(`accessor ${i}`, accessor.bufferView, accessor.byteOffset ?? 0, accessor.count, componentBytes * components);
    }
    const sparse = accessor.sparse;
    if (sparse) {
      const indexBytes = COMPONENT_BYTES[sparse.indices.componentType] ?? 4;
      checkAccessorRange(
        `sparse indices of accessor ${i}`,
        sparse.indices.bufferView,
        sparse.indices.byteOffset ?? 0,
        sparse.count,
        indexBytes,
        indexBytes,
      );
      const valueBytes = componentBytes * components;
      checkAccessorRange(
        `sparse values of accessor ${i}`,
        sparse.values.bufferView,
        sparse.values.byteOffset ?? 0,
        sparse.count,
        valueBytes,
        valueBytes,
      );
    }
  });
}

/**
 * Every accessor is allocated in full on read, whether its data is in a bufferView, zero-filled (no
 * bufferView: sparse or not), or decoded: the ranges above cannot bound that, the element count
 * does. Accessors a Draco primitive fills count what the decoder makes of its buffer (once per
 * primitive, however many share the buffer), and a meshopt bufferView its decoded count × byteStride
 * (in 4-byte elements): a 48 KB model must not declare 240 elements and decode 384 M.
 */
async function checkElementTotal(json: GLTF.IGLTF, resources: Record<string, Uint8Array>, max: number): Promise<void> {
  const draco = await dracoDecodedElements(json, resources);
  const meshopt = meshoptDecodedElements(json);
  let total = draco.elements + meshopt;
  (json.accessors ?? []).forEach((accessor, i) => {
    if (!draco.accessors.has(i)) total += accessor.count * (TYPE_COMPONENTS[accessor.type] ?? 1);
  });
  if (total > max) {
    const what = draco.elements + meshopt > 0 ? 'decodes to' : 'declares';
    const how = draco.elements + meshopt > 0 ? ', Draco and meshopt data as decoded' : '';
    throw new ModelError(
      `model ${what} ${total.toLocaleString('en')} accessor elements (count × components${how}), ` +
        `over the limit of ${max.toLocaleString('en')}`,
    );
  }
}

type DracoPrimitive = { bufferView: number; attributes: Record<string, number> };
type DracoCounts = { points: number; faces: number };

/**
 * Elements the Draco extension will allocate, and the accessors it fills. Each distinct buffer is
 * decoded once here to read its point and face counts (Draco has no header-only count); the
 * extension then copies num_points × components per attribute and num_faces × 3 indices for every
 * primitive that references it.
 */
async function dracoDecodedElements(
  json: GLTF.IGLTF,
  resources: Record<string, Uint8Array>,
): Promise<{ elements: number; accessors: Set<number> }> {
  const accessors = new Set<number>();
  if (!(json.extensionsUsed ?? []).includes('KHR_draco_mesh_compression')) return { elements: 0, accessors };
  const counts = new Map<number, DracoCounts>();
  let elements = 0;
  for (const primitive of (json.meshes ?? []).flatMap((mesh) => mesh.primitives)) {
    const draco = primitive.extensions?.KHR_draco_mesh_compression as DracoPrimitive | undefined;
    if (!draco) continue;
    let count = counts.get(draco.bufferView);
    if (!count) {
      count = await dracoCounts(json, resources, draco.bufferView);
      counts.set(draco.bufferView, count);
    }
    for (const semantic of Object.keys(draco.attributes ?? {})) {
      const index = primitive.attributes[semantic];
      if (index === undefined) continue;
      accessors.add(index);
      elements += count.points * (TYPE_COMPONENTS[json.accessors?.[index]?.type ?? 'SCALAR'] ?? 1);
    }
    if (primitive.indices !== undefined) {
      accessors.add(primitive.indices);
      elements += count.faces * 3;
    }
  }
  return { elements, accessors };
}

/** Point and face counts of one Draco bufferView, decoded and released at once. */
async function dracoCounts(json: GLTF.IGLTF, resources: Record<string, Uint8Array>, bufferView: number): Promise<DracoCounts> {
  const view = json.bufferViews?.[bufferView];
  if (!view) throw new ModelError(`a Draco primitive names bufferView ${bufferView}, which does not exist`);
  const buffer = json.buffers?.[view.buffer];
  const resource = buffer?.uri ? resources[buffer.uri] : resources[GLB_BUFFER];
  if (!resource) throw new ModelError(`the Draco data of bufferView ${bufferView} is not in any buffer`);
  const data = BufferUtils.toView(resource, view.byteOffset ?? 0, view.byteLength);
  // biome-ignore lint/suspicious/noExplicitAny: draco3dgltf's emscripten module is untyped here
  const module = (await codec('draco3d.decoder')) as any;
  const decoder = new module.Decoder();
  const input = new module.DecoderBuffer();
  const mesh = new module.Mesh();
  try {
    input.Init(data, data.length);
    if (!decoder.DecodeBufferToMesh(input, mesh).ok()) throw new ModelError(`the Draco data of bufferView ${bufferView} cannot be decoded`);
    return { points: mesh.num_points(), faces: mesh.num_faces() };
  } finally {
    module.destroy(mesh);
    module.destroy(input);
    module.destroy(decoder);
  }
}

/** 4-byte elements the meshopt extension allocates: each compressed bufferView decodes to count × byteStride bytes. */
function meshoptDecodedElements(json: GLTF.IGLTF): number {
  let bytes = 0;
  for (const view of json.bufferViews ?? []) {
    const meshopt = view.extensions?.EXT_meshopt_compression as { count?: number; byteStride?: number } | undefined;
    if (meshopt) bytes += (meshopt.count ?? 0) * (meshopt.byteStride ?? 0);
  }
  return Math.ceil(bytes / 4);
}

const isDataUri = (uri: string) => uri.startsWith('data:');

/** URIs of external buffers and images (not data URIs): the files a .gltf needs beside it. */
export function externalUris(json: GLTF.IGLTF): string[] {
  const uris = new Set<string>();
  for (const item of [...(json.buffers ?? []), ...(json.images ?? [])]) {
    if (item.uri && !isDataUri(item.uri)) uris.add(item.uri);
  }
  return [...uris];
}

function decodeDataUri(uri: string, what: string): Uint8Array {
  const comma = uri.indexOf(',');
  if (comma < 0) throw new ModelError(`${what} has a malformed data URI`);
  const meta = uri.slice(5, comma);
  const payload = uri.slice(comma + 1);
  return meta.endsWith(';base64') ? Buffer.from(payload, 'base64') : Buffer.from(decodeURIComponent(payload), 'utf8');
}

/**
 * Parse model bytes (GLB or .gltf JSON) into the JSON + resources glTF-Transform reads, after
 * checking the container and every range. External resources come from `loadResource`.
 */
async function parseModel(bytes: Uint8Array, loadResource?: ResourceLoader): Promise<JSONDocument> {
  let json: GLTF.IGLTF;
  const resources: Record<string, Uint8Array> = {};
  let bin: Uint8Array | null = null;
  const glb = isGlb(bytes);
  if (glb) {
    ({ json, bin } = splitGlb(bytes));
    if (bin) resources[GLB_BUFFER] = bin;
  } else {
    const start = bytes
      .subarray(0, 64)
      .findIndex((b) => b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09 && b !== 0xef && b !== 0xbb && b !== 0xbf);
    if (start < 0 || bytes[start] !== 0x7b /* { */) {
      throw new ModelError(`not a glTF model: wrong magic "${showMagic(bytes)}" (expected "glTF" or a JSON object)`);
    }
    json = parseJson(bytes, 'glTF JSON');
  }

  for (const uri of externalUris(json)) {
    if (!loadResource) throw new ModelError(`external resource "${uri}" cannot be resolved for this model`);
    try {
      resources[uri] = await loadResource(uri);
    } catch (err) {
      if (err instanceof ModelError) throw err;
      throw new ModelError(`external resource "${uri}" cannot be read (${oneLine(err)})`);
    }
  }

  const bufferBytes = (json.buffers ?? []).map((buffer, i): number | null => {
    const ext = buffer.extensions as Record<string, { fallback?: boolean }> | undefined;
    if (ext?.EXT_meshopt_compression?.fallback && !buffer.uri) return null;
    if (!buffer.uri) {
      if (!glb || i !== 0) throw new ModelError(`buffer ${i} has no uri and is not the GLB binary chunk`);
      if (!bin) throw new ModelError('buffer 0 expects a GLB binary chunk but the file has none (buffer past the end of the file)');
      return bin.byteLength;
    }
    if (isDataUri(buffer.uri)) return decodeDataUri(buffer.uri, `buffer ${i}`).byteLength;
    return resources[buffer.uri]!.byteLength;
  });
  checkRanges(json, bufferBytes);
  await checkElementTotal(json, resources, BAKE_LIMITS.maxAccessorElements);
  (json.images ?? []).forEach((image, i) => {
    if (image.bufferView === undefined && image.uri === undefined) throw new ModelError(`image ${i} has neither a uri nor a bufferView`);
  });
  return { json, resources: resources as JSONDocument['resources'] };
}

/** Read model bytes into a Document; every failure is a ModelError with one clear line. */
export async function readModel(bytes: Uint8Array, loadResource?: ResourceLoader): Promise<Document> {
  const jsonDoc = await parseModel(bytes, loadResource);
  const io = await ioWith(codecsFor(jsonDoc.json.extensionsUsed ?? [], 'decoder'));
  let document: Document;
  try {
    document = await io.readJSON(jsonDoc);
  } catch (err) {
    throw new ModelError(`invalid glTF: ${oneLine(err)}`);
  }
  assertTexturesAreImages(document);
  return document;
}

type ImageFormat = 'png' | 'jpeg' | 'webp' | 'avif' | 'gif' | 'ktx2' | 'dds';
const ascii = (bytes: Uint8Array, start: number, end: number) => Buffer.from(bytes.subarray(start, end)).toString('latin1');

/** An image format from its magic number, or null. */
export function imageFormatOf(bytes: Uint8Array): ImageFormat | null {
  if (bytes.length >= 8 && ascii(bytes, 0, 8) === '\x89PNG\r\n\x1a\n') return 'png';
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'jpeg';
  if (bytes.length >= 12 && ascii(bytes, 0, 4) === 'RIFF' && ascii(bytes, 8, 12) === 'WEBP') return 'webp';
  if (bytes.length >= 12 && ascii(bytes, 4, 8) === 'ftyp' && /^avi[fs]$/.test(ascii(bytes, 8, 12))) return 'avif';
  if (bytes.length >= 6 && /^GIF8[79]a$/.test(ascii(bytes, 0, 6))) return 'gif';
  if (bytes.length >= 12 && ascii(bytes, 0, 12) === '\xabKTX 20\xbb\r\n\x1a\n') return 'ktx2';
  if (bytes.length >= 4 && ascii(bytes, 0, 4) === 'DDS ') return 'dds';
  return null;
}

const RASTER: ImageFormat[] = ['png', 'jpeg', 'webp', 'avif', 'gif'];
/** The formats a declared mimeType allows (a PNG/JPEG mix-up is common in real models and harmless). */
const ALLOWED_BY_MIME: Record<string, ImageFormat[]> = {
  'image/png': RASTER,
  'image/jpeg': RASTER,
  'image/webp': RASTER,
  'image/avif': RASTER,
  'image/gif': RASTER,
  'image/ktx2': ['ktx2'],
  'image/vnd-ms.dds': ['dds'],
};

/**
 * Every texture must be an image by its bytes: a "texture" that is really some other file (a
 * resource URI pointing at anything) fails the model instead of being packed into a public file.
 */
function assertTexturesAreImages(document: Document): void {
  document
    .getRoot()
    .listTextures()
    .forEach((texture, i) => {
      const image = texture.getImage();
      if (!image) return;
      const mime = texture.getMimeType();
      const declared = Object.hasOwn(ALLOWED_BY_MIME, mime) ? mime : null; // else glTF-Transform guessed it from the URI
      const allowed = declared ? ALLOWED_BY_MIME[declared]! : [...RASTER, 'ktx2', 'dds'];
      const format = imageFormatOf(image);
      if (format && allowed.includes(format)) return;
      const label = texture.getURI() || texture.getName() || `#${i}`;
      throw new ModelError(
        `texture ${label} is not an image: its bytes are ${format ?? 'no known image format'}, ` +
          `not ${allowed.join('/')}${declared ? ` (declared ${declared})` : ''}`,
      );
    });
}

/**
 * The file a local .gltf's resource URI names, confined to the model's folder: a relative path
 * (percent-decoded) that stays inside `dir` once resolved and once symlinks are followed. No scheme
 * (`file:`, `http:`), no absolute path, no `..` out of the folder. Returns the real path to read.
 */
export async function localResourcePath(dir: string, uri: string): Promise<string> {
  const refuse = (why: string) => new ModelError(`external resource "${uri}" refused: ${why}`);
  if (/^[a-z][a-z0-9+.-]*:/i.test(uri)) throw refuse("a model's resources must be relative paths inside its folder");
  let path: string;
  try {
    path = decodeURIComponent(uri);
  } catch {
    throw refuse('malformed percent-encoding');
  }
  if (isAbsolute(path) || path.includes('\0')) throw refuse("a model's resources must be relative paths inside its folder");
  const inside = (root: string, target: string) => {
    const rel = relative(root, target);
    return rel !== '' && rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel);
  };
  const folder = resolvePath(dir);
  const target = resolvePath(folder, path);
  if (!inside(folder, target)) throw refuse("it points outside the model's folder");
  const real = await fs.realpath(target).catch(() => null);
  if (real === null) return target; // missing: reading it says so
  if (!inside(await fs.realpath(folder), real)) throw refuse("it links outside the model's folder");
  return real;
}

/** Resolve .gltf resource URIs inside a local directory (see localResourcePath). */
export function localResourceLoader(dir: string): ResourceLoader {
  return async (uri) => fs.readFile(await localResourcePath(dir, uri));
}

/** Read a local .glb or .gltf (with its external files) into a Document. */
export async function readModelFile(path: string): Promise<Document> {
  const bytes = await fs.readFile(path).catch((err: NodeJS.ErrnoException) => {
    throw new ModelError(`cannot read ${path} (${err.code ?? oneLine(err)})`);
  });
  return readModel(bytes, localResourceLoader(dirname(path)));
}

/**
 * The shortest decimal that is the same 32-bit float. glTF-Transform writes accessor bounds as
 * `Math.fround(x)` printed with up to 17 digits (0.425 becomes 0.42500001192092896); readers and
 * the validator compare them as float32, so the short form is the same bound in fewer bytes.
 */
export function shortestFloat32(x: number): number {
  for (let digits = 1; digits < 9; digits++) {
    const y = Number(x.toPrecision(digits));
    if (Math.fround(y) === Math.fround(x)) return y;
  }
  return x;
}

/**
 * Lossless JSON savings glTF-Transform's writer leaves: accessor min/max in their shortest float32
 * form; `mode` (4, triangles) and `byteOffset` (0) left out where they are the default; vertex
 * bufferViews that lie back to back with the same stride merged into one (glTF-Transform writes
 * one per primitive, so every slot quad had its own). On a small room with eight slot quads this
 * is ~1 KB of a ~44 KB file (bake/slots/embed.ts).
 */
function compactJson(json: GLTF.IGLTF): void {
  mergeVertexBufferViews(json);
  for (const accessor of json.accessors ?? []) {
    if (accessor.min) accessor.min = accessor.min.map(shortestFloat32);
    if (accessor.max) accessor.max = accessor.max.map(shortestFloat32);
    if (accessor.byteOffset === 0) delete accessor.byteOffset;
  }
  for (const view of json.bufferViews ?? []) if (view.byteOffset === 0) delete view.byteOffset;
  for (const mesh of json.meshes ?? []) for (const primitive of mesh.primitives) if (primitive.mode === 4) delete primitive.mode;
}

const ARRAY_BUFFER = 34962;

/** Merge each run of adjacent plain vertex bufferViews of one stride; renumber every reference. */
function mergeVertexBufferViews(json: GLTF.IGLTF): void {
  const views = json.bufferViews ?? [];
  const mergeable = (v: GLTF.IBufferView) =>
    v.target === ARRAY_BUFFER && v.byteStride !== undefined && !v.extensions && !v.extras && !v.name;
  const into = new Map<number, { index: number; shift: number }>(); // merged view → (view it joins, its offset there)
  let run: number | null = null;
  views.forEach((view, i) => {
    const head = run === null ? null : views[run]!;
    const headEnd = head ? (head.byteOffset ?? 0) + head.byteLength : -1;
    if (
      head &&
      mergeable(view) &&
      view.buffer === head.buffer &&
      view.byteStride === head.byteStride &&
      (view.byteOffset ?? 0) === headEnd
    ) {
      into.set(i, { index: run!, shift: headEnd - (head.byteOffset ?? 0) });
      head.byteLength += view.byteLength;
    } else {
      run = mergeable(view) ? i : null;
    }
  });
  if (!into.size) return;
  for (const accessor of json.accessors ?? []) {
    const target = accessor.bufferView === undefined ? undefined : into.get(accessor.bufferView);
    if (target) accessor.byteOffset = (accessor.byteOffset ?? 0) + target.shift;
  }
  const renumber: number[] = [];
  let kept = 0;
  views.forEach((_, i) => (renumber[i] = into.has(i) ? -1 : kept++));
  const finalIndex = (i: number) => renumber[into.get(i)?.index ?? i]!;
  // Every reference to a bufferView is a property named `bufferView` (accessors, sparse, images, Draco).
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) {
      for (const item of value) visit(item);
      return;
    }
    if (typeof value !== 'object' || value === null) return;
    for (const [key, child] of Object.entries(value)) {
      if (key === 'extras') continue;
      if (key === 'bufferView' && typeof child === 'number') (value as Record<string, number>)[key] = finalIndex(child);
      else visit(child);
    }
  };
  const { bufferViews: _, ...rest } = json;
  visit(rest);
  json.bufferViews = views.filter((_, i) => !into.has(i));
}

/** A GLB container around a JSON document and its binary chunk (GLB 2.0: chunks 4-byte aligned). */
function packGlb(json: GLTF.IGLTF, bin: Uint8Array | undefined): Uint8Array {
  const jsonChunk = BufferUtils.pad(BufferUtils.encodeText(JSON.stringify(json)), 0x20);
  const binChunk = bin?.byteLength ? BufferUtils.pad(bin, 0) : null;
  const chunk = (type: number, data: Uint8Array) =>
    BufferUtils.concat([BufferUtils.toView(new Uint32Array([data.byteLength, type])), data]);
  const chunks = [chunk(CHUNK_JSON, jsonChunk), ...(binChunk ? [chunk(CHUNK_BIN, binChunk)] : [])];
  const length = 12 + chunks.reduce((n, c) => n + c.byteLength, 0);
  return BufferUtils.concat([BufferUtils.toView(new Uint32Array([GLB_MAGIC, 2, length])), ...chunks]);
}

/**
 * Write a Document as one self-contained GLB (buffers merged into the single binary chunk).
 * `compact`: the optimized models the bake publishes also get compactJson's lossless savings
 * (source models keep glTF-Transform's exact output: their hash is the room's model id).
 * `vertexLayout` (compact only): glTF-Transform's, interleaved unless asked.
 */
export async function writeGlb(document: Document, options: { compact?: boolean; vertexLayout?: VertexLayout } = {}): Promise<Uint8Array> {
  if (document.getRoot().listBuffers().length > 1) {
    const { unpartition } = await import('@gltf-transform/functions');
    await document.transform(unpartition());
  }
  const io = await ioWith(
    codecsFor(
      document
        .getRoot()
        .listExtensionsUsed()
        .map((e) => e.extensionName),
      'encoder',
    ),
  );
  if (!options.compact) return io.writeBinary(document);
  // The shared NodeIO's layout is read when writeJSON is called: set for this call alone, restored at once.
  const written = io.setVertexLayout(options.vertexLayout ?? VertexLayout.INTERLEAVED).writeJSON(document, { format: Format.GLB });
  io.setVertexLayout(VertexLayout.INTERLEAVED);
  const { json, resources } = await written;
  compactJson(json);
  return packGlb(json, resources[GLB_BUFFER]);
}
