// A Dectris acquisition opened from the user's disk (a master file `*_master.h5` and the data files
// `*_data_00000N.h5` it links to), read by hdf5_reader.ts, with no server: its frames' stored chunks (each data
// file's /entry/data/data, one frame per chunk, bitshuffle+LZ4 — HDF5 filter 32008 with LZ4, cd_values[4] = 2 — or
// unfiltered) handed to the page's WGSL decoder window by window as the server's GET …/chunks would hand them
// (decode.ts ChunkSource: the same manifest and data layout), and the calibration the page shows.
//
// Contract (the server's formats/dectris.cpp and stem/stored_chunks.h, mirrored):
// - Frames are the master's entry/data links named data or data_NNNNNN in name order, each an external link to a
//   chosen data file (or a dataset in the master), concatenated; frame i is scan position i of a row-major scan.
// - The scan shape is entry/sample/simulation/scan_rows × scan_cols when recorded, else a square frame count's root;
//   otherwise the caller gives it (LocalAcquisition.setScan).
// - Products zero the dtype's maximum (the sentinel) and the pixels where pixel_mask > 0
//   (entry/instrument/detector/pixel_mask or …/detectorSpecific/pixel_mask), as the server's …/block and …/chunks do.
// - Refused with LocalRefused naming the file and what was expected: not HDF5, truncated (an address or a chunk past
//   the file's end), a data file the master links to that was not chosen, a dataset not chunked one frame per
//   chunk, another filter (or bitshuffle without LZ4), signed/float/big-endian frames, a chunk never written.
import type { ChunkManifest, StoredChunk } from "../webgpu/decode";
import type { StemBlock } from "../webgpu/block";
import { type ByteSource, type ChunkEntry, type Dataset, Hdf5Error, Hdf5File, fileSource } from "./hdf5_reader";

/** Why a local acquisition cannot be opened or read; the message names the file. */
export class LocalRefused extends Error {}

/** A calibration quantity with where it came from (the page's table shows both), or why it is unknown. */
export interface LocalQuantity {
  value?: number;
  unit: string;
  source?: string;
  missing?: string;
}

interface Part {
  file: Hdf5File;
  link: string; // the master's entry/data link
  dataset: string;
  first: number; // the acquisition's frame of its frame 0
  frames: number;
  chunks: ChunkEntry[]; // indexed by the part's frame
  filter: "bitshuffle_lz4" | "none";
}

export interface LocalCalibration {
  energy: LocalQuantity; // eV
  semiangle: LocalQuantity; // mrad
  scanStep: LocalQuantity; // Å
  detectorAnglePerPixel: LocalQuantity; // mrad per detector pixel (from the file; the page derives it otherwise)
  detectorDistance: LocalQuantity; // m
  pixelSize: LocalQuantity; // m
}

const DTYPES: Record<number, StemBlock["dtype"]> = { 1: "u8", 2: "u16", 4: "u32" };
const BITSHUFFLE = 32008;

export class LocalAcquisition {
  scan: [number, number] | null = null;
  scanSource = "";
  /** The master's groups whose metadata the page could not list (dense link storage), with why. */
  unreadGroups: string[] = [];
  private constructor(
    readonly name: string,
    readonly master: Hdf5File,
    private readonly parts: Part[],
    readonly frames: number,
    readonly dtype: StemBlock["dtype"],
    readonly detector: [number, number],
    readonly badPixels: number[],
    readonly calibration: LocalCalibration,
    readonly metadata: Map<string, { value: number | string; units: string }>,
  ) {}

  get sentinel(): number {
    return { u8: 0xff, u16: 0xffff, u32: 0xffffffff }[this.dtype];
  }
  get frameBytes(): number {
    return this.detector[0] * this.detector[1] * { u8: 1, u16: 2, u32: 4 }[this.dtype];
  }
  get files(): string[] {
    return this.parts.map((p) => p.file.name);
  }
  get filters(): string[] {
    return [...new Set(this.parts.map((p) => p.filter))];
  }

  /** The scan shape (rows × cols = frames); a LocalRefused naming the frame count otherwise. */
  setScan(rows: number, cols: number, source: string): void {
    if (!(rows > 0 && cols > 0 && rows * cols === this.frames)) throw new LocalRefused(`scan ${rows} × ${cols} is not the ${this.frames} frames of ${this.name}`);
    this.scan = [rows, cols];
    this.scanSource = source;
  }

  /** Opens the master among `files` (the one named *_master.h5, else the only one with entry/data links) and the
   *  data files it links to, from the same list. */
  static async open(files: File[]): Promise<LocalAcquisition> {
    return LocalAcquisition.openSources(files.map(fileSource));
  }

  static async openSources(sources: ByteSource[]): Promise<LocalAcquisition> {
    try {
      return await openSources(sources);
    } catch (e) {
      if (e instanceof Hdf5Error) throw new LocalRefused(e.message);
      throw e;
    }
  }

  /** The stored chunks of frames [start, start + count), read from the files, as GET …/chunks answers them. */
  async window(start: number, count: number): Promise<{ manifest: ChunkManifest; data: Uint8Array; wireBytes: number }> {
    const picked: { part: number; entry: ChunkEntry; frame: number }[] = [];
    for (let f = start; f < start + count; f++) {
      const k = this.parts.findIndex((p) => f >= p.first && f < p.first + p.frames);
      const part = this.parts[k];
      if (!part) throw new LocalRefused(`frame ${f} lies outside the ${this.frames} frames of ${this.name}`);
      const entry = part.chunks[f - part.first];
      if (!entry) throw new LocalRefused(`${part.file.name}, frame ${f}: ${part.dataset} has no stored chunk for it (never written: the acquisition is incomplete)`);
      picked.push({ part: k, entry, frame: f });
    }
    const offsets: number[] = [];
    let total = 0;
    for (const p of picked) {
      offsets.push(total);
      total += Math.ceil(p.entry.size / 4) * 4;
    }
    const data = new Uint8Array(total);
    // Reads: a run of chunks lying close together in one file is one slice (the data files store frames in order).
    let wire = 0;
    for (let i = 0; i < picked.length;) {
      let j = i + 1;
      const file = this.parts[picked[i].part].file;
      let end = picked[i].entry.address + picked[i].entry.size;
      while (j < picked.length && picked[j].part === picked[i].part && picked[j].entry.address >= end && picked[j].entry.address - end < 65536) {
        end = picked[j].entry.address + picked[j].entry.size;
        j++;
      }
      const at = picked[i].entry.address;
      let bytes: Uint8Array;
      try {
        bytes = await file.bytes(at, end - at, `the chunk of frame ${picked[i].frame}${j - i > 1 ? ` (and ${j - i - 1} more)` : ""}`);
      } catch (e) {
        throw new LocalRefused(`${e instanceof Error ? e.message : String(e)}: frame ${picked[i].frame}'s chunk cannot be read`);
      }
      wire += bytes.length;
      for (let k = i; k < j; k++) data.set(bytes.subarray(picked[k].entry.address - at, picked[k].entry.address - at + picked[k].entry.size), offsets[k]);
      i = j;
    }
    const chunks: StoredChunk[] = picked.map((p, i) => {
      const raw = this.parts[p.part].filter === "none" || (p.entry.filterMask & 1) !== 0;
      // bitshuffle's chunk header: the frame's bytes (u64) and the block size in bytes (u32), both big-endian.
      const blockBytes = !raw && p.entry.size >= 12 ? new DataView(data.buffer, offsets[i] + 8, 4).getUint32(0, false) : 0;
      return { frame: p.frame, offset: offsets[i], bytes: p.entry.size, filter: raw ? "none" : "bitshuffle_lz4", block_bytes: blockBytes, file: p.part };
    });
    const manifest: ChunkManifest = {
      start, count, frames_total: this.frames, dtype: this.dtype, element_size: { u8: 1, u16: 2, u32: 4 }[this.dtype],
      frame_shape: this.detector, frame_bytes: this.frameBytes, sentinel: this.sentinel, bad_pixels: this.badPixels,
      files: this.files, data_bytes: data.length, chunks,
    };
    return { manifest, data, wireBytes: wire };
  }
}

async function openSources(sources: ByteSource[]): Promise<LocalAcquisition> {
  if (!sources.length) throw new LocalRefused("no file chosen: choose the *_master.h5 file and its *_data_NNNNNN.h5 files");
  const masters = sources.filter((s) => /_master\.h5$/i.test(s.name));
  if (masters.length > 1) throw new LocalRefused(`${masters.map((m) => m.name).join(", ")}: choose one acquisition's master file at a time`);
  const masterSrc = masters[0] ?? (sources.length === 1 ? sources[0] : null);
  if (!masterSrc) throw new LocalRefused(`none of ${sources.map((s) => s.name).join(", ")} is a master file (*_master.h5): choose it with its data files`);
  const master = await Hdf5File.open(masterSrc);
  const group = await master.resolve("/entry/data");
  if (group.kind !== "hard") throw new LocalRefused(`${master.name}: /entry/data is not a group`);
  const links = [...(await master.links(group.address, "/entry/data")).entries()].filter(([n]) => /^data(_\d+)?$/.test(n)).sort(([a], [b]) => (a < b ? -1 : 1));
  if (!links.length) throw new LocalRefused(`${master.name}: /entry/data holds no data or data_NNNNNN links (expected a Dectris master file)`);
  const opened = new Map<string, Hdf5File>();
  const parts: Part[] = [];
  let first = 0;
  let dtype: StemBlock["dtype"] | null = null;
  let detector: [number, number] | null = null;
  for (const [name, link] of links) {
    let file = master;
    let ds: Dataset;
    let where = `/entry/data/${name}`;
    if (link.kind === "external") {
      const base = link.file.split(/[\\/]/).pop() ?? link.file;
      const src = sources.find((s) => s.name === base);
      if (!src) throw new LocalRefused(`${master.name}: entry/data/${name} links to ${base}, which is not among the chosen files (choose it with the master)`);
      file = opened.get(base) ?? (await Hdf5File.open(src));
      opened.set(base, file);
      const target = await file.resolve(link.path);
      if (target.kind !== "hard") throw new LocalRefused(`${base}: ${link.path} is a further ${target.kind} link: not followed`);
      where = link.path;
      ds = await file.dataset(target.address, link.path);
    } else if (link.kind === "hard") ds = await master.dataset(link.address, where);
    else throw new LocalRefused(`${master.name}: entry/data/${name} is a soft link: not followed (the server follows none either)`);
    const what = `${file.name}: ${where}`;
    if (ds.shape.length !== 3) throw new LocalRefused(`${what} has shape [${ds.shape.join(", ")}]: expected frames × rows × cols`);
    if (ds.type.kind !== "uint" || !DTYPES[ds.type.size] || !ds.type.littleEndian)
      throw new LocalRefused(`${what} holds ${ds.type.littleEndian ? "" : "big-endian "}${ds.type.kind} of ${ds.type.size} bytes: the page decodes little-endian uint8, uint16 or uint32 counts (open float or signed frames with the server)`);
    const dt = DTYPES[ds.type.size];
    const det: [number, number] = [ds.shape[1], ds.shape[2]];
    if (dtype && (dt !== dtype || det[0] !== detector![0] || det[1] !== detector![1]))
      throw new LocalRefused(`${what} holds ${dt} frames of ${det.join(" × ")}, the first data file's are ${dtype} of ${detector!.join(" × ")}`);
    dtype = dt;
    detector = det;
    if (ds.layout.kind !== "chunked")
      throw new LocalRefused(ds.layout.kind === "unsupported" ? `${what}: ${ds.layout.what}, which the page does not read (open it with the server)`
        : `${what} is stored ${ds.layout.kind}: the page reads chunked datasets of one frame per chunk (open it with the server)`);
    if (ds.layout.chunk.length !== 3 || ds.layout.chunk[0] !== 1 || ds.layout.chunk[1] !== det[0] || ds.layout.chunk[2] !== det[1])
      throw new LocalRefused(`${what} is chunked [${ds.layout.chunk.join(", ")}]: the page reads one frame per chunk ([1, ${det.join(", ")}])`);
    let filter: Part["filter"] = "none";
    if (ds.filters.length === 1 && ds.filters[0].id === BITSHUFFLE) {
      const cd = ds.filters[0].values;
      if (cd[4] !== 2) throw new LocalRefused(`${what}: bitshuffle (filter 32008) with compression ${cd[4] ?? "none"} (cd_values[4]): the page decodes bitshuffle with LZ4 (2) only`);
      filter = "bitshuffle_lz4";
    } else if (ds.filters.length)
      throw new LocalRefused(`${what}: filter pipeline ${ds.filters.map((f) => `${f.id}${f.name ? ` (${f.name})` : ""}`).join(" + ")}: the page decodes bitshuffle+LZ4 (HDF5 filter 32008) or unfiltered chunks`);
    const chunks: ChunkEntry[] = [];
    for (const c of await file.chunks(ds)) if (c.coords[0] < ds.shape[0]) chunks[c.coords[0]] = c;
    // Every frame's chunk present and inside the file, checked before anything is decoded (a truncated data file is
    // refused here, naming it and the first frame it lacks).
    for (let i = 0; i < ds.shape[0]; i++) {
      const c = chunks[i];
      if (!c) throw new LocalRefused(`${what}: frame ${first + i} has no stored chunk (never written: the acquisition is incomplete)`);
      if (file.base + c.address + c.size > file.source.size)
        throw new LocalRefused(`${file.name}: truncated: frame ${first + i}'s chunk lies at bytes ${file.base + c.address}–${file.base + c.address + c.size}, the file has ${file.source.size} bytes`);
    }
    parts.push({ file, link: name, dataset: where, first, frames: ds.shape[0], chunks, filter });
    first += ds.shape[0];
  }
  const unread: string[] = [];
  const meta = await collectScalars(master, unread);
  const num = (path: string) => {
    const m = meta.get(path);
    return m && typeof m.value === "number" ? m : undefined;
  };
  // Pixel mask: nonzero pixels are zeroed by the products.
  const badPixels: number[] = [];
  for (const p of ["/entry/instrument/detector/pixel_mask", "/entry/instrument/detector/detectorSpecific/pixel_mask"]) {
    let link;
    try {
      link = await master.resolve(p);
    } catch {
      continue;
    }
    if (link.kind !== "hard") continue;
    const ds = await master.dataset(link.address, p);
    const n = detector![0] * detector![1];
    if (ds.shape.length !== 2 || ds.shape[0] !== detector![0] || ds.shape[1] !== detector![1] || ds.type.kind === "float" || ds.type.kind === "string")
      throw new LocalRefused(`${master.name}: ${p} is [${ds.shape.join(", ")}] ${ds.type.kind}: expected the detector's ${detector!.join(" × ")} integers`);
    const raw = await master.raw(ds, n * ds.type.size);
    const v = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    for (let i = 0; i < n; i++) {
      const x = ds.type.size === 1 ? v.getUint8(i) : ds.type.size === 2 ? v.getUint16(i * 2, ds.type.littleEndian) : v.getUint32(i * 4, ds.type.littleEndian);
      if (x) badPixels.push(i);
    }
    break;
  }
  // Calibration, as src/stem/calibration.cpp reads it: named fields, and quantities found by their path's suffix.
  const quantity = (path: string, unit: string, scales: Record<string, number>): LocalQuantity | null => {
    const m = num(path);
    if (!m) return null;
    const s = scales[m.units];
    return s === undefined ? { unit, missing: `${path} is in "${m.units}", not ${Object.keys(scales).join(" or ")}` } : { value: (m.value as number) * s, unit, source: `file: ${path}` };
  };
  const bySuffix = (suffix: string, unit: string, scales: Record<string, number>): LocalQuantity | null => {
    for (const [path, m] of meta) if (path.endsWith(suffix) && typeof m.value === "number" && scales[m.units] !== undefined) return quantity(path, unit, scales);
    return null;
  };
  const A = { angstrom: 1, A: 1, nm: 10, m: 1e10 };
  const mrad = { mrad: 1, rad: 1e3 };
  const cal: LocalCalibration = {
    energy: quantity("/entry/instrument/beam/incident_energy", "eV", { eV: 1, "": 1, keV: 1e3 }) ?? { unit: "eV", missing: "the file does not record the beam energy (entry/instrument/beam/incident_energy)" },
    semiangle: quantity("/entry/instrument/beam/convergence_semi_angle", "mrad", { ...mrad, "": 1 }) ?? { unit: "mrad", missing: "the file does not record the convergence semi-angle" },
    scanStep: bySuffix("/scan_step", "angstrom", A) ?? { unit: "angstrom", missing: "the file does not record the scan step" },
    detectorAnglePerPixel: bySuffix("/detector_angle_per_pixel", "mrad", mrad) ?? { unit: "mrad", missing: "the file records none" },
    detectorDistance: quantity("/entry/instrument/detector/detector_distance", "m", { m: 1, mm: 1e-3 }) ?? { unit: "m", missing: "not recorded (entry/instrument/detector/detector_distance)" },
    pixelSize: quantity("/entry/instrument/detector/x_pixel_size", "m", { m: 1, um: 1e-6 }) ?? { unit: "m", missing: "not recorded (entry/instrument/detector/x_pixel_size)" },
  };
  const acq = new (LocalAcquisition as unknown as new (...a: unknown[]) => LocalAcquisition)(
    masterSrc.name.replace(/_master\.h5$/i, ""), master, parts, first, dtype!, detector!, badPixels, cal, meta);
  acq.unreadGroups = unread;
  const rows = num("/entry/sample/simulation/scan_rows")?.value as number | undefined;
  const cols = num("/entry/sample/simulation/scan_cols")?.value as number | undefined;
  if (rows && cols && rows * cols === first) acq.setScan(rows, cols, "file: entry/sample/simulation/scan_rows, scan_cols");
  else {
    const side = Math.round(Math.sqrt(first));
    if (side * side === first) acq.setScan(side, side, `a square scan of the ${first} frames (the file records no scan shape)`);
  }
  return acq;
}

/** Every scalar (one-value) dataset of the master outside /entry/data, with its "units" attribute: path → value. */
async function collectScalars(f: Hdf5File, unread: string[]): Promise<Map<string, { value: number | string; units: string }>> {
  const out = new Map<string, { value: number | string; units: string }>();
  let budget = 4096; // objects visited at most (a master holds some hundreds)
  const visit = async (address: number, path: string, depth: number): Promise<void> => {
    if (depth > 8 || budget-- <= 0) return;
    let links;
    try {
      links = await f.links(address, path || "/");
    } catch (e) {
      // A group the page cannot list (dense link storage): said on the page, its quantities then unknown.
      if (e instanceof Hdf5Error) unread.push(`${path || "/"} (${e.message.replace(`${f.name}: `, "")})`);
      return;
    }
    for (const [name, link] of links) {
      const p = `${path}/${name}`;
      if (link.kind !== "hard" || p === "/entry/data") continue;
      let ds: Dataset | null = null;
      try {
        ds = await f.dataset(link.address, p);
      } catch {
        await visit(link.address, p, depth + 1);
        continue;
      }
      if (ds.shape.reduce((a, b) => a * b, 1) !== 1 || ds.layout.kind === "chunked") continue;
      try {
        const units = ds.attributes.get("units");
        out.set(p, { value: await f.scalar(ds), units: typeof units === "string" ? units : "" });
      } catch {
        /* a value the page does not read */
      }
    }
  };
  const root = await f.resolve("/");
  if (root.kind === "hard") await visit(root.address, "", 0);
  return out;
}
