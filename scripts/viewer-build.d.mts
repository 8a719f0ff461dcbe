export interface ViewerBundle {
  files: Map<string, Uint8Array>;
  entries: Record<'viewer' | 'docs', { js: string; css: string | null }>;
  inputs: string[];
  builtAt: number;
}
export const ROOT: string;
export const VIEWER_OUT: string;
export function buildViewer(): Promise<ViewerBundle>;
export function writeViewer(bundle: ViewerBundle, dir: string): void;
/** Throws an Error with a one-line reason when dist/viewer is missing, unreadable or older than a source. */
export function readBuiltViewer(dir?: string): ViewerBundle;
