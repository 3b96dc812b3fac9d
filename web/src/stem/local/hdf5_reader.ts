// A small reader of the HDF5 container, enough to find a Dectris acquisition's frames in files on the user's disk
// (local_acquisition.ts): groups and their links, scalar datasets, and a chunked dataset's chunk index (each
// chunk's offset, stored size and filter mask) with its filter pipeline. It reads only the bytes it needs, through a
// ByteSource (a File's slices): a data file of many GiB is never loaded whole, and no chunk is decoded here (the
// page's WGSL decoder does that).
//
// What it reads (HDF5 File Format Specification 3.0): superblock versions 0-3; object headers version 1 and 2
// (with continuation blocks); groups as symbol tables (B-tree v1 + local heap: what HDF5 writes with its default,
// "earliest" format, as Dectris' DCU and h5py do) or as link messages (compact new-style groups); hard and external
// links; dataspace, datatype (fixed-point, floating-point, fixed strings), filter pipeline (v1, v2) and data layout
// messages version 3 (compact, contiguous, chunked with a B-tree v1 chunk index) and 4 (compact, contiguous, chunked
// with HDF5 1.10's chunk indexes: single chunk, implicit, fixed array, extensible array — chunk_index.ts).
// Anything else (dense link storage in a fractal heap, a B-tree v2 chunk index) is refused by Hdf5Error naming the
// file, the object and what
// was found. Every address and length is checked against the file's size: a truncated file is refused, never read
// past its end.
import { newChunkIndex } from "./chunk_index";

/* Units: every offset and size is in bytes; addresses are relative to the superblock's base address. */

/** Where the bytes come from: a File (File.slice), or a buffer in tests. */
export interface ByteSource {
  readonly name: string;
  readonly size: number;
  read(offset: number, length: number): Promise<Uint8Array>;
}

/** A File (or Blob with a name) as a ByteSource. */
export function fileSource(file: File): ByteSource {
  return { name: file.name, size: file.size, read: async (o, n) => new Uint8Array(await file.slice(o, o + n).arrayBuffer()) };
}

/** What the reader cannot read, naming the file and the object. */
export class Hdf5Error extends Error {}

export const UNDEF = -1; // an undefined address (all bits set)

export interface Datatype {
  kind: "uint" | "int" | "float" | "string" | "other";
  size: number; // bytes per element
  littleEndian: boolean;
}

export interface Filter {
  id: number;
  name: string;
  flags: number;
  values: number[]; // client data (cd_values)
}

export type Layout =
  | { kind: "compact"; data: Uint8Array }
  | { kind: "contiguous"; address: number; size: number }
  | { kind: "chunked"; index: ChunkIndex; chunk: number[] } // chunk: dims of one chunk (elements), without the element size
  | { kind: "unsupported"; what: string };

/** One stored chunk: its offset in the dataset (elements per dimension), where it lies and how long it is, and the
 *  filters HDF5 skipped for it (bit i set: filter i of the pipeline was not applied). */
export interface ChunkEntry {
  coords: number[];
  address: number;
  size: number;
  filterMask: number;
}

/** Where a chunked dataset's chunk index lies and of which kind (layout message 3: always a B-tree v1; layout
 *  message 4, HDF5 1.10's format: the kinds of chunk_index.ts). `filtered`: whether the dataset has filters (the
 *  index's entries then carry each chunk's size and filter mask). */
export type ChunkIndex =
  | { type: "btree1"; address: number }
  | { type: "single"; address: number; filteredSize: number; filterMask: number }
  | { type: "implicit"; address: number }
  | { type: "fixed"; address: number }
  | { type: "extensible"; address: number }
  | { type: "btree2"; address: number };

export interface Dataset {
  file: Hdf5File;
  path: string;
  shape: number[];
  type: Datatype;
  layout: Layout;
  filters: Filter[];
  attributes: Map<string, string | number>;
}

export type Link = { kind: "hard"; address: number } | { kind: "external"; file: string; path: string } | { kind: "soft"; path: string };

interface Message {
  type: number;
  body: DataView;
  bytes: Uint8Array;
}

const ascii = (b: Uint8Array) => {
  const z = b.indexOf(0);
  return new TextDecoder().decode(z >= 0 ? b.subarray(0, z) : b);
};

/** A little-endian cursor over one block of bytes; reads past its end throw (naming what was read). */
export class Cursor {
  pos = 0;
  constructor(readonly v: DataView, private readonly what: string, private readonly so: number, private readonly sl: number) {}
  private need(n: number) {
    if (this.pos + n > this.v.byteLength) throw new Hdf5Error(`${this.what}: ends after ${this.v.byteLength} bytes, ${this.pos + n} needed`);
  }
  u8() { this.need(1); return this.v.getUint8(this.pos++); }
  u16() { this.need(2); const x = this.v.getUint16(this.pos, true); this.pos += 2; return x; }
  u32() { this.need(4); const x = this.v.getUint32(this.pos, true); this.pos += 4; return x; }
  uint(n: number): number {
    this.need(n);
    let x = 0;
    let all = true;
    for (let i = n - 1; i >= 0; i--) {
      const b = this.v.getUint8(this.pos + i);
      if (b !== 0xff) all = false;
      x = x * 256 + b;
    }
    this.pos += n;
    if (all && n >= 4) return UNDEF;
    if (x > Number.MAX_SAFE_INTEGER) throw new Hdf5Error(`${this.what}: a ${n}-byte value over 2^53`);
    return x;
  }
  offset() { return this.uint(this.so); }
  length() { return this.uint(this.sl); }
  bytes(n: number) { this.need(n); const b = new Uint8Array(this.v.buffer, this.v.byteOffset + this.pos, n); this.pos += n; return b; }
  skip(n: number) { this.need(n); this.pos += n; }
}

export class Hdf5File {
  private constructor(
    readonly source: ByteSource,
    readonly base: number,
    readonly so: number, // size of offsets
    readonly sl: number, // size of lengths
    readonly root: number, // the root group's object header address
  ) {}

  /** Opens `source` as HDF5: its superblock (at 0, 512, 1024, 2048, …). Hdf5Error when it is none. */
  static async open(source: ByteSource): Promise<Hdf5File> {
    const sig = [0x89, 0x48, 0x44, 0x46, 0x0d, 0x0a, 0x1a, 0x0a];
    for (let at = 0; at + 8 <= source.size; at = at ? at * 2 : 512) {
      const head = await source.read(at, Math.min(256, source.size - at));
      if (!sig.every((b, i) => head[i] === b)) continue;
      const c = new Cursor(new DataView(head.buffer, head.byteOffset, head.byteLength), `${source.name}: superblock`, 8, 8);
      c.skip(8);
      const version = c.u8();
      let so: number, sl: number, root: number, base: number;
      if (version <= 1) {
        c.skip(4); // free-space, root group symbol table entry, reserved, shared header versions
        so = c.u8();
        sl = c.u8();
        c.skip(1 + 4 + 4 + (version === 1 ? 4 : 0));
        if (![2, 4, 8].includes(so) || ![2, 4, 8].includes(sl)) throw new Hdf5Error(`${source.name}: superblock gives ${so}-byte offsets and ${sl}-byte lengths`);
        const cc = new Cursor(c.v, `${source.name}: superblock`, so, sl);
        cc.pos = c.pos;
        base = cc.offset();
        cc.offset(); // free-space info
        cc.offset(); // end of file
        cc.offset(); // driver info
        cc.offset(); // root symbol table entry: link name offset
        root = cc.offset();
      } else if (version === 2 || version === 3) {
        so = c.u8();
        sl = c.u8();
        if (![2, 4, 8].includes(so) || ![2, 4, 8].includes(sl)) throw new Hdf5Error(`${source.name}: superblock gives ${so}-byte offsets and ${sl}-byte lengths`);
        c.skip(1);
        const cc = new Cursor(c.v, `${source.name}: superblock`, so, sl);
        cc.pos = c.pos;
        base = cc.offset();
        cc.offset(); // superblock extension
        cc.offset(); // end of file
        root = cc.offset();
      } else throw new Hdf5Error(`${source.name}: HDF5 superblock version ${version} is not one the page reads (0-3)`);
      if (base === UNDEF) base = 0;
      return new Hdf5File(source, base + (at && base === 0 ? at : 0), so, sl, root);
    }
    throw new Hdf5Error(`${source.name}: not an HDF5 file (no HDF5 signature at byte 0, 512, 1024, …)`);
  }

  get name(): string {
    return this.source.name;
  }

  /** `length` bytes at file address `address`; Hdf5Error when they lie past the file's end (a truncated file). */
  async bytes(address: number, length: number, what: string): Promise<Uint8Array> {
    const at = this.base + address;
    if (address === UNDEF || address < 0 || length < 0 || at + length > this.source.size)
      throw new Hdf5Error(`${this.name}: ${what} lies at bytes ${at}–${at + length} but the file has ${this.source.size} bytes (truncated?)`);
    return this.source.read(at, length);
  }

  /** A cursor over `length` bytes at `address` (for chunk_index.ts too). */
  async cursor(address: number, length: number, what: string): Promise<Cursor> {
    const b = await this.bytes(address, length, what);
    return new Cursor(new DataView(b.buffer, b.byteOffset, b.byteLength), `${this.name}: ${what}`, this.so, this.sl);
  }

  /** The messages of the object header at `address` (continuation blocks followed). */
  async messages(address: number, what: string): Promise<Message[]> {
    const size = this.source.size - this.base - address;
    const first = await this.cursor(address, Math.max(0, Math.min(size, 512)), `object header of ${what}`);
    const out: Message[] = [];
    const blocks: [number, number][] = [];
    const v1 = first.v.byteLength >= 16 && first.v.getUint8(0) === 1 && first.v.getUint32(0, true) !== 0x5244484f;
    if (v1) {
      first.skip(2);
      const n = first.u16();
      first.skip(4);
      const hsize = first.u32();
      blocks.push([address + 16, hsize]);
      while (blocks.length) {
        const [at, len] = blocks.shift()!;
        const c = await this.cursor(at, len, `object header of ${what}`);
        while (c.pos + 8 <= len && out.length < n) {
          const type = c.u16();
          const msize = c.u16();
          c.skip(4);
          const body = c.bytes(msize);
          out.push(this.msg(type, body));
          if (type === 0x10) blocks.push(this.continuation(body, what));
        }
      }
      return out;
    }
    // Version 2: "OHDR", version 2, flags; chunk #0's size; messages; checksum. Continuations: "OCHK" … checksum.
    if (ascii(new Uint8Array(first.v.buffer, first.v.byteOffset, 4)) !== "OHDR") throw new Hdf5Error(`${this.name}: ${what}: no object header at address ${address}`);
    first.skip(4);
    if (first.u8() !== 2) throw new Hdf5Error(`${this.name}: ${what}: object header version is not 1 or 2`);
    const flags = first.u8();
    if (flags & 0x20) first.skip(16);
    if (flags & 0x10) first.skip(4);
    const chunk0 = first.uint([1, 2, 4, 8][flags & 3]);
    blocks.push([address + first.pos, chunk0]);
    let first4 = true; // chunk #0 holds messages only; each OCHK block: signature, messages, checksum
    while (blocks.length) {
      const [at, len] = blocks.shift()!;
      const c = await this.cursor(at, len, `object header of ${what}`);
      let stop = len;
      if (!first4) {
        if (ascii(c.bytes(4)) !== "OCHK") throw new Hdf5Error(`${this.name}: ${what}: object header continuation without its OCHK signature`);
        stop = len - 4;
      }
      first4 = false;
      while (c.pos + 4 + (flags & 4 ? 2 : 0) <= stop) {
        const type = c.u8();
        const msize = c.u16();
        c.skip(1 + (flags & 4 ? 2 : 0));
        const body = c.bytes(msize);
        out.push(this.msg(type, body));
        if (type === 0x10) blocks.push(this.continuation(body, what));
      }
    }
    return out;
  }

  private msg(type: number, bytes: Uint8Array): Message {
    return { type, bytes, body: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength) };
  }

  private continuation(body: Uint8Array, what: string): [number, number] {
    const c = new Cursor(new DataView(body.buffer, body.byteOffset, body.byteLength), `${this.name}: ${what}: continuation`, this.so, this.sl);
    return [c.offset(), c.length()];
  }

  /** The links of the group whose object header is at `address`: name → link. */
  async links(address: number, what: string): Promise<Map<string, Link>> {
    const out = new Map<string, Link>();
    const msgs = await this.messages(address, what);
    for (const m of msgs) {
      if (m.type === 0x11) await this.symbolTable(m, what, out);
      else if (m.type === 0x06) {
        const [name, link] = this.linkMessage(m, what);
        out.set(name, link);
      } else if (m.type === 0x02) {
        const c = new Cursor(m.body, `${this.name}: ${what}: link info`, this.so, this.sl);
        c.skip(1);
        const flags = c.u8();
        if (flags & 1) c.skip(8);
        const heap = c.offset();
        if (heap !== UNDEF) throw new Hdf5Error(`${this.name}: ${what}: its links are stored densely (a fractal heap): not read by the page; open the acquisition with the server`);
      }
    }
    return out;
  }

  private linkMessage(m: Message, what: string): [string, Link] {
    const c = new Cursor(m.body, `${this.name}: ${what}: link message`, this.so, this.sl);
    if (c.u8() !== 1) throw new Hdf5Error(`${this.name}: ${what}: link message version is not 1`);
    const flags = c.u8();
    const type = flags & 0x8 ? c.u8() : 0;
    if (flags & 0x4) c.skip(8);
    if (flags & 0x10) c.skip(1);
    const nlen = c.uint([1, 2, 4, 8][flags & 3]);
    const name = new TextDecoder().decode(c.bytes(nlen));
    if (type === 0) return [name, { kind: "hard", address: c.offset() }];
    if (type === 1) return [name, { kind: "soft", path: new TextDecoder().decode(c.bytes(c.u16())) }];
    if (type === 64) {
      const b = c.bytes(c.u16());
      const parts = new TextDecoder().decode(b.subarray(1)).split("\0");
      return [name, { kind: "external", file: parts[0], path: parts[1] ?? "" }];
    }
    throw new Hdf5Error(`${this.name}: ${what}/${name}: link type ${type} is not one the page follows`);
  }

  private async symbolTable(m: Message, what: string, out: Map<string, Link>): Promise<void> {
    const c = new Cursor(m.body, `${this.name}: ${what}: symbol table`, this.so, this.sl);
    const btree = c.offset();
    const heapAddr = c.offset();
    const hc = await this.cursor(heapAddr, 8 + 2 * this.sl + this.so, `${what}: local heap`);
    if (ascii(hc.bytes(4)) !== "HEAP") throw new Hdf5Error(`${this.name}: ${what}: no local heap at address ${heapAddr}`);
    hc.skip(4);
    const heapSize = hc.length();
    hc.length();
    const heapData = await this.bytes(hc.offset(), heapSize, `${what}: local heap data`);
    const nameAt = (off: number) => ascii(heapData.subarray(off));
    const walk = async (node: number, depth: number): Promise<void> => {
      if (depth > 32) throw new Hdf5Error(`${this.name}: ${what}: group B-tree deeper than 32 levels (a loop?)`);
      const head = await this.cursor(node, 8 + 2 * this.so, `${what}: group B-tree node`);
      if (ascii(head.bytes(4)) !== "TREE" || head.u8() !== 0) throw new Hdf5Error(`${this.name}: ${what}: no group B-tree node at address ${node}`);
      const level = head.u8();
      const used = head.u16();
      const body = await this.cursor(node + 8 + 2 * this.so, (used + 1) * this.sl + used * this.so, `${what}: group B-tree node`);
      const children: number[] = [];
      for (let i = 0; i < used; i++) {
        body.length();
        children.push(body.offset());
      }
      for (const child of children) {
        if (level > 0) await walk(child, depth + 1);
        else {
          const sh = await this.cursor(child, 8, `${what}: symbol node`);
          if (ascii(sh.bytes(4)) !== "SNOD") throw new Hdf5Error(`${this.name}: ${what}: no symbol table node at address ${child}`);
          sh.skip(2);
          const n = sh.u16();
          const entry = 2 * this.so + 24;
          const ec = await this.cursor(child + 8, n * entry, `${what}: symbol node entries`);
          for (let i = 0; i < n; i++) {
            const start = ec.pos;
            const nameOff = ec.offset();
            const header = ec.offset();
            const cache = ec.u32();
            ec.skip(4);
            const scratch = ec.bytes(16);
            ec.pos = start + entry;
            const name = nameAt(nameOff);
            if (cache === 2) out.set(name, { kind: "soft", path: nameAt(new DataView(scratch.buffer, scratch.byteOffset, 4).getUint32(0, true)) });
            else out.set(name, { kind: "hard", address: header });
          }
        }
      }
    };
    await walk(btree, 0);
  }

  /** The object header address at `path` ("/entry/data/data") in this file; Hdf5Error naming the missing part. An
   *  external link is returned as such (the caller opens its file). */
  async resolve(path: string): Promise<Link> {
    let at: Link = { kind: "hard", address: this.root };
    let walked = "";
    for (const part of path.split("/").filter(Boolean)) {
      if (at.kind !== "hard") throw new Hdf5Error(`${this.name}: ${walked} is a ${at.kind} link, not a group`);
      const links = await this.links(at.address, walked || "/");
      const next = links.get(part);
      walked += `/${part}`;
      if (!next) throw new Hdf5Error(`${this.name}: no ${walked} (expected in a Dectris file)`);
      at = next;
    }
    return at;
  }

  /** The dataset whose object header is at `address` (named `path` in messages). */
  async dataset(address: number, path: string): Promise<Dataset> {
    const msgs = await this.messages(address, path);
    const ds: Dataset = { file: this, path, shape: [], type: { kind: "other", size: 0, littleEndian: true }, layout: { kind: "unsupported", what: "no layout message" }, filters: [], attributes: new Map() };
    let sawSpace = false, sawType = false;
    for (const m of msgs) {
      const c = new Cursor(m.body, `${this.name}: ${path}`, this.so, this.sl);
      if (m.type === 0x01) {
        sawSpace = true;
        const version = c.u8();
        const rank = c.u8();
        const flags = c.u8();
        if (version === 1) c.skip(5);
        else c.skip(1);
        for (let i = 0; i < rank; i++) ds.shape.push(c.length());
        void flags;
      } else if (m.type === 0x03) {
        sawType = true;
        ds.type = parseType(c);
      } else if (m.type === 0x0b) ds.filters = parseFilters(c);
      else if (m.type === 0x08) ds.layout = this.parseLayout(c);
      else if (m.type === 0x0c) {
        try {
          const [k, v] = this.parseAttribute(c);
          ds.attributes.set(k, v);
        } catch {
          /* an attribute the page does not need */
        }
      }
    }
    if (!sawSpace || !sawType) throw new Hdf5Error(`${this.name}: ${path} is not a dataset (no dataspace or datatype message)`);
    return ds;
  }

  private parseLayout(c: Cursor): Layout {
    const version = c.u8();
    if (version !== 3 && version !== 4) return { kind: "unsupported", what: `data layout message version ${version}` };
    const cls = c.u8();
    if (cls === 0) return { kind: "compact", data: c.bytes(c.u16()) };
    if (cls === 1) return { kind: "contiguous", address: c.offset(), size: c.length() };
    if (cls === 2 && version === 3) {
      const rank = c.u8();
      const btree = c.offset();
      const chunk: number[] = [];
      for (let i = 0; i < rank; i++) chunk.push(c.u32());
      chunk.pop(); // the element size
      return { kind: "chunked", index: { type: "btree1", address: btree }, chunk };
    }
    if (cls === 2) {
      const flags = c.u8();
      const rank = c.u8();
      const width = c.u8();
      const chunk: number[] = [];
      for (let i = 0; i < rank; i++) chunk.push(c.uint(width));
      chunk.pop();
      const type = c.u8();
      if (type === 1) {
        const filtered = (flags & 2) !== 0;
        const filteredSize = filtered ? c.length() : 0;
        const filterMask = filtered ? c.u32() : 0;
        return { kind: "chunked", index: { type: "single", filteredSize, filterMask, address: c.offset() }, chunk };
      }
      if (type === 2) return { kind: "chunked", index: { type: "implicit", address: c.offset() }, chunk };
      if (type === 3) {
        c.skip(1);
        return { kind: "chunked", index: { type: "fixed", address: c.offset() }, chunk };
      }
      if (type === 4) {
        c.skip(5);
        return { kind: "chunked", index: { type: "extensible", address: c.offset() }, chunk };
      }
      if (type === 5) {
        c.skip(6);
        return { kind: "chunked", index: { type: "btree2", address: c.offset() }, chunk };
      }
      return { kind: "unsupported", what: `a chunk index of type ${type}` };
    }
    return { kind: "unsupported", what: `layout class ${cls}` };
  }

  /** One attribute's name and value when it is a string or a scalar number (others throw: the caller skips them). */
  private parseAttribute(c: Cursor): [string, string | number] {
    const version = c.u8();
    if (version === 1) c.skip(1);
    else c.skip(1);
    const nlen = c.u16(), tlen = c.u16(), slen = c.u16();
    if (version === 3) c.skip(1);
    const pad = (n: number) => (version === 1 ? Math.ceil(n / 8) * 8 : n);
    const name = ascii(c.bytes(pad(nlen)));
    const tbytes = c.bytes(pad(tlen));
    c.skip(pad(slen));
    const t = parseType(new Cursor(new DataView(tbytes.buffer, tbytes.byteOffset, tbytes.byteLength), name, this.so, this.sl));
    const data = c.bytes(Math.min(t.size, c.v.byteLength - c.pos));
    return [name, scalarValue(t, data)];
  }

  /** A scalar (or one-element) dataset's value: a number or a string. Hdf5Error when it is larger or stored chunked. */
  async scalar(ds: Dataset): Promise<string | number> {
    const n = ds.shape.reduce((a, b) => a * b, 1);
    if (n !== 1) throw new Hdf5Error(`${this.name}: ${ds.path} holds ${n} values, not one`);
    return scalarValue(ds.type, await this.raw(ds, ds.type.size));
  }

  /** A small contiguous or compact dataset's bytes (`bytes` of them). */
  async raw(ds: Dataset, bytes: number): Promise<Uint8Array> {
    if (ds.layout.kind === "compact") return ds.layout.data.subarray(0, bytes);
    if (ds.layout.kind === "contiguous") {
      if (ds.layout.address === UNDEF) return new Uint8Array(bytes); // never written: HDF5's fill value, 0
      return this.bytes(ds.layout.address, bytes, ds.path);
    }
    throw new Hdf5Error(`${this.name}: ${ds.path} is stored ${ds.layout.kind === "chunked" ? "chunked" : ds.layout.what}: the page reads such small datasets only when contiguous or compact`);
  }

  /** Every stored chunk of a chunked dataset, from its chunk index (B-tree v1 here; HDF5 1.10's kinds in
   *  chunk_index.ts), in the index's order. */
  async chunks(ds: Dataset): Promise<ChunkEntry[]> {
    if (ds.layout.kind !== "chunked") throw new Hdf5Error(`${this.name}: ${ds.path} is not chunked`);
    if (ds.layout.index.type !== "btree1") return newChunkIndex(this, ds);
    const rank = ds.shape.length + 1;
    const keyBytes = 8 + 8 * rank;
    const out: ChunkEntry[] = [];
    const walk = async (node: number, depth: number): Promise<void> => {
      if (node === UNDEF) return; // no chunk written
      if (depth > 32) throw new Hdf5Error(`${this.name}: ${ds.path}: chunk B-tree deeper than 32 levels (a loop?)`);
      const head = await this.cursor(node, 8 + 2 * this.so, `${ds.path}: chunk B-tree node`);
      if (ascii(head.bytes(4)) !== "TREE") throw new Hdf5Error(`${this.name}: ${ds.path}: no chunk B-tree node at address ${node}`);
      if (head.u8() !== 1) throw new Hdf5Error(`${this.name}: ${ds.path}: a B-tree node of another kind than chunks at ${node}`);
      const level = head.u8();
      const used = head.u16();
      const body = await this.cursor(node + 8 + 2 * this.so, (used + 1) * keyBytes + used * this.so, `${ds.path}: chunk B-tree node`);
      for (let i = 0; i < used; i++) {
        const size = body.u32();
        const filterMask = body.u32();
        const coords: number[] = [];
        for (let d = 0; d < rank; d++) coords.push(body.uint(8));
        coords.pop();
        const child = body.offset();
        if (level > 0) await walk(child, depth + 1);
        else out.push({ coords, address: child, size, filterMask });
      }
    };
    await walk(ds.layout.index.address, 0);
    return out;
  }
}

function parseType(c: Cursor): Datatype {
  const cv = c.u8();
  const cls = cv & 0x0f;
  const bits = c.u8();
  c.skip(2);
  const size = c.u32();
  const littleEndian = (bits & 1) === 0;
  if (cls === 0) return { kind: bits & 0x08 ? "int" : "uint", size, littleEndian };
  if (cls === 1) return { kind: "float", size, littleEndian };
  if (cls === 3) return { kind: "string", size, littleEndian };
  return { kind: "other", size, littleEndian };
}

function parseFilters(c: Cursor): Filter[] {
  const version = c.u8();
  const n = c.u8();
  if (version === 1) c.skip(6);
  const out: Filter[] = [];
  for (let i = 0; i < n; i++) {
    const id = c.u16();
    const nlen = version === 1 || id >= 256 ? c.u16() : 0;
    const flags = c.u16();
    const nvals = c.u16();
    const name = nlen ? ascii(c.bytes(version === 1 ? Math.ceil(nlen / 8) * 8 : nlen)) : "";
    const values: number[] = [];
    for (let k = 0; k < nvals; k++) values.push(c.u32());
    if (version === 1 && nvals % 2) c.skip(4);
    out.push({ id, name, flags, values });
  }
  return out;
}

function scalarValue(t: Datatype, b: Uint8Array): string | number {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const le = t.littleEndian;
  if (t.kind === "string") return ascii(b);
  if (t.kind === "float" && t.size === 8) return v.getFloat64(0, le);
  if (t.kind === "float" && t.size === 4) return v.getFloat32(0, le);
  if ((t.kind === "uint" || t.kind === "int") && [1, 2, 4, 8].includes(t.size)) {
    if (t.size === 1) return t.kind === "int" ? v.getInt8(0) : v.getUint8(0);
    if (t.size === 2) return t.kind === "int" ? v.getInt16(0, le) : v.getUint16(0, le);
    if (t.size === 4) return t.kind === "int" ? v.getInt32(0, le) : v.getUint32(0, le);
    return Number(t.kind === "int" ? v.getBigInt64(0, le) : v.getBigUint64(0, le));
  }
  throw new Hdf5Error(`a ${t.kind} of ${t.size} bytes is not a scalar the page reads`);
}
