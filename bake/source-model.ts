/**
 * A room's source model as the bake reads it: its bytes, a Document of it, and the GLB published as
 * model_url with its sha256 (RoomSlotData.model, and the slot engine's seed).
 */
import { promises as fs } from 'node:fs';
import type { Document } from '@gltf-transform/core';
import { sha256 } from '../artifacts/store.ts';
import { isGlb, ModelError, readModel, writeGlb, type ResourceLoader } from './gltf-io.ts';

/** Local copies of a model and its external resources (by URI as written in the model). */
export interface ModelFiles {
  path: string;
  resources: Record<string, string>;
}

export interface SourceModel {
  bytes: Uint8Array;
  /** A fresh Document of the model (optimizing is destructive: one per attempt). */
  read: () => Promise<Document>;
  /** The first Document read. */
  document: Document;
  /** What model_url serves: a self-contained .glb byte for byte, anything else packed into one. */
  glb: Uint8Array;
  sha256: string;
}

export const readSource = (path: string, what: string): Promise<Buffer> =>
  fs.readFile(path).catch((err: NodeJS.ErrnoException) => {
    throw new ModelError(`cannot read the ${what} (${err.code ?? err.message})`);
  });

export async function readSourceModel(files: ModelFiles): Promise<SourceModel> {
  const bytes = await readSource(files.path, 'model');
  const loadResource: ResourceLoader = async (uri) => {
    const path = files.resources[uri];
    if (!path) throw new ModelError(`external resource "${uri}" was not resolved`);
    return readSource(path, `resource "${uri}"`);
  };
  const read = () => readModel(bytes, loadResource);
  const document = await read();
  const selfContained = isGlb(bytes) && Object.keys(files.resources).length === 0;
  const glb = selfContained ? bytes : await writeGlb(document);
  return { bytes, read, document, glb, sha256: sha256(glb) };
}
