/**
 * Which model a viewer page shows (viewer/page-data.ts `chooseModel`, used by the page and by the
 * server's preload hints): the `?variant=` asked for, else the fastest the browser can decode; and
 * the page's hints fetch that model and only the decoder it needs.
 */
import { describe, expect, it } from 'vitest';
import type { PageAssets } from '../../../server/view/assets.ts';
import { viewerPage } from '../../../server/view/pages.ts';
import { chooseModel, type ViewRoom, type ViewVariant } from '../../../viewer/page-data.ts';

const variant = (name: string, extensionsRequired: string[]): ViewVariant => ({
  name,
  url: `/files/${name}.glb`,
  bytes: 1000,
  extensionsRequired,
});
const VARIANTS = [
  variant('draco', ['KHR_draco_mesh_compression', 'EXT_texture_webp']),
  variant('meshopt', ['EXT_meshopt_compression', 'KHR_mesh_quantization', 'EXT_texture_webp']),
  variant('plain', ['EXT_texture_webp']),
];
const room = (over: Partial<ViewRoom> = {}): ViewRoom => ({
  id: 1,
  title: 'Hall',
  architect: 'A',
  modelUrl: '/files/draco.glb',
  modelOptimized: true,
  sourceModelUrl: '/files/source.glb',
  slotsUrl: '/v1/rooms/1/slots',
  navmeshUrl: null,
  spawn: null,
  variants: VARIANTS,
  ...over,
});

describe('chooseModel', () => {
  it('picks meshopt by default, in whatever order the variants are listed', () => {
    expect(chooseModel(room(), null)).toMatchObject({ name: 'meshopt', url: '/files/meshopt.glb', notice: null });
    expect(chooseModel(room({ variants: [...VARIANTS].reverse() }), null).name).toBe('meshopt');
  });

  it('shows the variant asked for', () => {
    for (const v of VARIANTS)
      expect(chooseModel(room(), v.name)).toMatchObject({
        name: v.name,
        url: v.url,
        extensionsRequired: v.extensionsRequired,
        notice: null,
      });
  });

  it('says an unknown name is unknown and shows the default', () => {
    expect(chooseModel(room(), 'ktx2')).toMatchObject({
      name: 'meshopt',
      notice: 'There is no model variant "ktx2": showing meshopt. This room has draco, meshopt, plain.',
    });
  });

  it('without WebAssembly, picks a variant that needs no decoder', () => {
    expect(chooseModel(room(), null, false).name).toBe('plain');
    expect(chooseModel(room({ variants: VARIANTS.slice(0, 2) }), null, false).name).toBe('meshopt'); // nothing loadable: the default
  });

  it('shows the Draco model of a room baked before variants, saying so when another was asked for', () => {
    const old = room({ variants: [] });
    expect(chooseModel(old, null)).toEqual({
      name: null,
      url: '/files/draco.glb',
      bytes: null,
      extensionsRequired: ['KHR_draco_mesh_compression'],
      notice: null,
    });
    expect(chooseModel(old, 'draco').notice).toBeNull();
    expect(chooseModel(old, 'meshopt').notice).toBe(
      'This room was baked before model variants: there is no "meshopt" variant, showing its Draco model.',
    );
    const source = room({ variants: [], modelUrl: '/files/source.glb', modelOptimized: false });
    expect(chooseModel(source, 'draco')).toMatchObject({
      url: '/files/source.glb',
      extensionsRequired: [],
      notice: expect.stringMatching(/showing its source model/),
    });
    expect(chooseModel(room({ variants: [], modelUrl: null, modelOptimized: false }), 'plain')).toMatchObject({ url: null, notice: null });
  });
});

describe('the room page preloads the chosen model and only its decoder', () => {
  const assets: PageAssets = {
    viewer: { js: '/view/assets/viewer-A.js', css: null },
    docs: { js: '/view/assets/docs-B.js' },
    decoders: {
      draco: { js: '/view/assets/draco_wasm_wrapper-1.js', wasm: '/view/assets/draco_decoder-2.wasm' },
      meshopt: '/view/assets/meshopt_decoder-3.js',
      basis: { js: '/view/assets/basis_transcoder-6.js', wasm: '/view/assets/basis_transcoder-7.wasm' },
    },
    swagger: { js: '/view/assets/swagger-4.js', css: '/view/assets/swagger-5.css' },
  };
  const hints = (variant: string | null, r = room()) =>
    [
      ...viewerPage(assets, { kind: 'room', decoders: assets.decoders, variant, room: r }, 'Hall').matchAll(
        /<link rel="(?:module)?preload" href="([^"]+)"/g,
      ),
    ]
      .map((m) => m[1]!)
      .filter((href) => href !== assets.viewer.js && !href.startsWith('/v1/'));

  it.each([
    [null, ['/view/assets/meshopt_decoder-3.js', '/files/meshopt.glb']],
    ['meshopt', ['/view/assets/meshopt_decoder-3.js', '/files/meshopt.glb']],
    ['draco', ['/files/draco.glb', '/view/assets/draco_wasm_wrapper-1.js', '/view/assets/draco_decoder-2.wasm']],
    ['plain', ['/files/plain.glb']],
    ['nonsense', ['/view/assets/meshopt_decoder-3.js', '/files/meshopt.glb']],
  ])('?variant=%s', (variant, expected) => {
    expect(hints(variant)).toEqual(expected);
  });

  it('a room baked before variants: its Draco model and decoder', () => {
    expect(hints('plain', room({ variants: [] }))).toEqual([
      '/files/draco.glb',
      '/view/assets/draco_wasm_wrapper-1.js',
      '/view/assets/draco_decoder-2.wasm',
    ]);
  });
});
