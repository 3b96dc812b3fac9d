// The chunk indexes of HDF5 1.10's file format (data layout message version 4: what h5py writes with
// libver="latest" and HDF5 writes for SWMR), read for hdf5_reader.ts: single chunk, implicit, fixed array and
// extensible array (HDF5 File Format Specification 3.0, III.I "Fixed Array" and III.H "Extensible Array"; the
// extensible array's block geometry as H5EA__hdr_init and H5EA__iblock_alloc compute it). A B-tree v2 index (two or
// more unlimited dimensions) is refused. Each entry: the chunk's address, and for a filtered dataset its stored
// size and filter mask (else the chunk's raw size and 0). A chunk's linear index is row-major over the chunk grid
// (its coordinates: index × chunk dims). Checksums are not verified; every read is bounded by the file's size.
import { type ChunkEntry, type Cursor, type Dataset, type Hdf5File, Hdf5Error, UNDEF } from "./hdf5_reader";

/** Every stored chunk of `ds` (a layout-4 chunked dataset), unwritten ones left out. */
export async function newChunkIndex(f: Hdf5File, ds: Dataset): Promise<ChunkEntry[]> {
  if (ds.layout.kind !== "chunked") throw new Hdf5Error(`${f.name}: ${ds.path} is not chunked`);
  const { index, chunk } = ds.layout;
  const filtered = ds.filters.length > 0;
  const grid = ds.shape.map((n, d) => Math.ceil(n / chunk[d]));
  const total = grid.reduce((a, b) => a * b, 1);
  const rawBytes = chunk.reduce((a, b) => a * b, 1) * ds.type.size;
  const coords = (i: number) => {
    const out = new Array<number>(grid.length);
    for (let d = grid.length - 1; d >= 0; d--) {
      out[d] = (i % grid[d]) * chunk[d];
      i = Math.floor(i / grid[d]);
    }
    return out;
  };
  const what = `${ds.path}: chunk index`;
  if (index.type === "single") {
    if (index.address === UNDEF) return [];
    return [{ coords: coords(0), address: index.address, size: filtered ? index.filteredSize : rawBytes, filterMask: index.filterMask }];
  }
  if (index.type === "implicit") {
    if (index.address === UNDEF) return [];
    return Array.from({ length: total }, (_, i) => ({ coords: coords(i), address: index.address + i * rawBytes, size: rawBytes, filterMask: 0 }));
  }
  // An entry of a fixed or extensible array of chunks: address, then (filtered) the size in the remaining bytes less
  // the 4-byte filter mask.
  const entry = (c: Cursor, size: number, i: number): ChunkEntry | null => {
    const start = c.pos;
    const address = c.offset();
    let bytes = rawBytes, mask = 0;
    if (filtered) {
      bytes = c.uint(size - f.so - 4);
      mask = c.u32();
    }
    c.pos = start + size;
    return address === UNDEF ? null : { coords: coords(i), address, size: bytes, filterMask: mask };
  };
  const out: ChunkEntry[] = [];
  const push = (e: ChunkEntry | null) => {
    if (e) out.push(e);
  };
  const sig = (c: Cursor, s: string, at: number) => {
    const got = String.fromCharCode(...c.bytes(4));
    if (got !== s) throw new Hdf5Error(`${f.name}: ${what}: no ${s} block at address ${at}`);
  };
  if (index.type === "fixed") {
    const h = await f.cursor(index.address, 8 + f.sl + f.so, what);
    sig(h, "FAHD", index.address);
    h.skip(2);
    const size = h.u8();
    const pageN = 2 ** h.u8();
    const max = h.length();
    const dblk = h.offset();
    if (dblk === UNDEF) return out;
    const n = Math.min(max, total);
    if (max <= pageN) {
      const c = await f.cursor(dblk, 6 + f.so + max * size, what);
      sig(c, "FADB", dblk);
      c.pos = 6 + f.so;
      for (let i = 0; i < n; i++) push(entry(c, size, i));
      return out;
    }
    const npages = Math.ceil(max / pageN);
    const bitmapBytes = Math.ceil(npages / 8);
    const head = await f.cursor(dblk, 6 + f.so + bitmapBytes, what);
    sig(head, "FADB", dblk);
    head.pos = 6 + f.so;
    const bitmap = head.bytes(bitmapBytes);
    const first = dblk + 10 + f.so + bitmapBytes;
    for (let p = 0; p < npages && p * pageN < n; p++) {
      if (!(bitmap[p >> 3] & (0x80 >> (p & 7)))) continue; // a page never written: no chunk in it
      const count = Math.min(pageN, max - p * pageN);
      const c = await f.cursor(first + p * (pageN * size + 4), count * size, what);
      for (let k = 0; k < count && p * pageN + k < n; k++) push(entry(c, size, p * pageN + k));
    }
    return out;
  }
  if (index.type === "extensible") {
    const h = await f.cursor(index.address, 12 + 6 * f.sl + f.so, what);
    sig(h, "EAHD", index.address);
    h.skip(2);
    const size = h.u8();
    const maxBits = h.u8();
    const ibElmts = h.u8();
    const dbMin = h.u8();
    const sbMinPtrs = h.u8();
    const pageN = 2 ** h.u8();
    for (let k = 0; k < 6; k++) h.length();
    const ib = h.offset();
    if (ib === UNDEF) return out;
    const log2 = (x: number) => Math.round(Math.log2(x));
    const nsblks = 1 + (maxBits - log2(dbMin));
    const sblk = Array.from({ length: nsblks }, (_, s) => ({ ndblks: 2 ** Math.floor(s / 2), nelmts: 2 ** Math.floor((s + 1) / 2) * dbMin }));
    const ibSblks = 2 * log2(sbMinPtrs);
    const ndblkAddrs = 2 * (sbMinPtrs - 1);
    const nsblkAddrs = nsblks - ibSblks;
    const arrOff = Math.ceil(maxBits / 8);
    const c = await f.cursor(ib, 6 + f.so + ibElmts * size + (ndblkAddrs + nsblkAddrs) * f.so, what);
    sig(c, "EAIB", ib);
    c.pos = 6 + f.so;
    let i = 0;
    for (let k = 0; k < ibElmts; k++, i++) push(i < total ? entry(c, size, i) : null);
    const dblkAddrs = Array.from({ length: ndblkAddrs }, () => c.offset());
    const sblkAddrs = Array.from({ length: nsblkAddrs }, () => c.offset());
    // One data block of `nelmts` elements at `at` (UNDEF: never written), its pages' initialised bits in `bits`.
    const dataBlock = async (at: number, nelmts: number, bits: Uint8Array | null) => {
      if (at === UNDEF) return void (i += nelmts);
      if (nelmts <= pageN) {
        const d = await f.cursor(at, 6 + f.so + arrOff + nelmts * size, what);
        sig(d, "EADB", at);
        d.pos = 6 + f.so + arrOff;
        for (let k = 0; k < nelmts; k++, i++) push(i < total ? entry(d, size, i) : null);
        return;
      }
      const first = at + 10 + f.so + arrOff;
      for (let p = 0; p < nelmts / pageN; p++) {
        if (bits && !(bits[p >> 3] & (0x80 >> (p & 7)))) {
          i += pageN;
          continue;
        }
        if (i >= total) return;
        const d = await f.cursor(first + p * (pageN * size + 4), pageN * size, what);
        for (let k = 0; k < pageN; k++, i++) push(i < total ? entry(d, size, i) : null);
      }
    };
    let next = 0;
    for (let s = 0; s < nsblks && i < total; s++) {
      const { ndblks, nelmts } = sblk[s];
      if (s < ibSblks) {
        for (let k = 0; k < ndblks && i < total; k++) await dataBlock(dblkAddrs[next++], nelmts, null);
        continue;
      }
      const sa = sblkAddrs[s - ibSblks];
      if (sa === UNDEF) {
        i += ndblks * nelmts;
        continue;
      }
      const npages = nelmts > pageN ? nelmts / pageN : 0;
      const bitmapBytes = npages ? ndblks * Math.ceil(npages / 8) : 0;
      const sc = await f.cursor(sa, 6 + f.so + arrOff + bitmapBytes + ndblks * f.so, what);
      sig(sc, "EASB", sa);
      sc.pos = 6 + f.so + arrOff;
      const bitmap = sc.bytes(bitmapBytes);
      const addrs = Array.from({ length: ndblks }, () => sc.offset());
      const per = Math.ceil(npages / 8);
      for (let k = 0; k < ndblks && i < total; k++) await dataBlock(addrs[k], nelmts, npages ? bitmap.subarray(k * per, (k + 1) * per) : null);
    }
    return out;
  }
  throw new Hdf5Error(`${f.name}: ${ds.path}: a B-tree v2 chunk index (HDF5 1.10's format for two or more unlimited dimensions) is not read by the page; open it with the server`);
}
