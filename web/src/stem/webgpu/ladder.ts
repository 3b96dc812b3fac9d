// The memory ladder of the page's resident block: when a view's block does not fit what the page may hold, the
// smaller views that would (a detector bin, a scan crop), offered as choices, never taken silently.
import { type StemBlock, WIDTH } from "./block";

/** A step of the memory ladder: a smaller view of the acquisition the page could hold instead (the CLI's
 *  --detector-bin N or --scan-region R0,R1,C0,C1), with its estimated block size. */
export interface LadderStep {
  label: string;
  id: string; // element id suffix: "bin-N" or "crop"
  view: { bin: number; region: [number, number, number, number] | null };
  bytes: number;
}

const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;

/** The ladder for a block of `shape` that does not fit in `limit` bytes: the smallest detector bin (2, 4, 8 or 16)
 *  that fits, and the largest centred scan crop that fits (binned values are counted as u32, what the server
 *  widens u16 sums to). Empty steps are left out. */
export function ladderSteps(shape: StemBlock["shape"], dtype: StemBlock["dtype"], limit: number): LadderStep[] {
  const [rows, cols, kr, kc] = shape;
  const steps: LadderStep[] = [];
  for (const bin of [2, 4, 8, 16]) {
    const bytes = rows * cols * Math.ceil(kr / bin) * Math.ceil(kc / bin) * 4;
    if (bytes <= limit) {
      steps.push({ label: `a detector bin of ${bin} (${mib(bytes)})`, id: `bin-${bin}`, view: { bin, region: null }, bytes });
      break;
    }
  }
  const frame = kr * kc * WIDTH[dtype];
  const f = Math.sqrt(limit / (rows * cols * frame));
  let [cr, cc] = [Math.max(1, Math.floor(rows * f)), Math.max(1, Math.floor(cols * f))];
  while (cr * cc * frame > limit && (cr > 1 || cc > 1)) (cr > cc ? cr-- : cc--);
  if (cr * cc * frame <= limit) {
    const r0 = Math.floor((rows - cr) / 2);
    const c0 = Math.floor((cols - cc) / 2);
    steps.push({ label: `a scan crop of ${cr} × ${cc} positions (${mib(cr * cc * frame)})`, id: "crop", view: { bin: 1, region: [r0, r0 + cr, c0, c0 + cc] }, bytes: cr * cc * frame });
  }
  return steps;
}

/** A block the page's adapter cannot hold: why, and the ladder's steps that would fit. */
export class BlockRefused {
  constructor(readonly reason: string, readonly steps: LadderStep[] = []) {}
}

/** The most bytes of decoded frames the page keeps on its adapter: the server's block limit (1 GiB). WebGPU does not
 *  report an adapter's memory; localStorage "tm.stem.maxBlockBytes" lowers it (the e2e test tries the ladder so). */
export const DEFAULT_MAX_BLOCK_BYTES = 2 ** 30;

/** A positive number stored in localStorage under `key` (a test's or a user's lower limit), else Infinity. */
export function localLimit(key: string): number {
  const v = Number(globalThis.localStorage?.getItem(key) ?? NaN);
  return v > 0 ? v : Infinity;
}

/** The most bytes of decoded frames the page holds now: DEFAULT_MAX_BLOCK_BYTES, or what localStorage lowers it to. */
export function pageBlockLimit(): number {
  return Math.min(DEFAULT_MAX_BLOCK_BYTES, localLimit("tm.stem.maxBlockBytes"));
}

/** Why the page cannot hold a block of this view (its shape, dtype and padded bytes) within `maxBytes`, and what
 *  would fit, or null when it can. Asked before the download (the first band's headers say the view's size). */
export function blockRefusal(view: { shape: StemBlock["shape"]; dtype: StemBlock["dtype"]; bytes: number }, maxBytes: number): BlockRefused | null {
  const bytes = view.bytes;
  if (bytes <= maxBytes) return null;
  const steps = ladderSteps(view.shape, view.dtype, maxBytes);
  return new BlockRefused(`the decoded block is ${mib(bytes)}, the page holds at most ${mib(maxBytes)} on its adapter; ` +
    (steps.length ? `what would fit: ${steps.map((s) => s.label).join(" or ")} — choose one, or the server computes the images` : "nothing smaller fits: the server computes the images"),
    steps);
}
