/**
 * How far a re-encoded normal map bends the normals: per pixel, the angle between the normal the
 * source encodes and the one the encoded image decodes to (tangent-space, [0,255] → [−1,1],
 * renormalised as a renderer does). Used by `make bench-bake` and the optimizer's tests.
 */
import sharp from 'sharp';

export interface AngularError {
  /** Degrees. */
  p50: number;
  p99: number;
  max: number;
  pixels: number;
}

async function rgb(image: Uint8Array, width?: number, height?: number) {
  const pipeline = sharp(image).removeAlpha();
  return (width ? pipeline.resize(width, height, { fit: 'fill' }) : pipeline).raw().toBuffer({ resolveWithObject: true });
}

/** Angular error of `encoded` against `source` (the source resized to the encoded size if they differ). */
export async function normalMapAngularError(source: Uint8Array, encoded: Uint8Array): Promise<AngularError> {
  const b = await rgb(encoded);
  const a = await rgb(source, b.info.width, b.info.height);
  const n = b.info.width * b.info.height;
  const angles = new Float64Array(n);
  const unit = (d: Buffer, i: number): [number, number, number] => {
    const x = d[i]! / 127.5 - 1,
      y = d[i + 1]! / 127.5 - 1,
      z = d[i + 2]! / 127.5 - 1;
    const l = Math.hypot(x, y, z) || 1;
    return [x / l, y / l, z / l];
  };
  for (let p = 0; p < n; p++) {
    const u = unit(a.data, p * 3);
    const v = unit(b.data, p * 3);
    const c = Math.min(1, Math.max(-1, u[0] * v[0] + u[1] * v[1] + u[2] * v[2]));
    angles[p] = (Math.acos(c) * 180) / Math.PI;
  }
  angles.sort();
  const at = (q: number) => angles[Math.min(n - 1, Math.floor(q * n))]!;
  return { p50: at(0.5), p99: at(0.99), max: angles[n - 1] ?? 0, pixels: n };
}
