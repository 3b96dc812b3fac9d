// A .npy file (format 1.0, little-endian, C order) of a product computed on the page, as the CLI's `-o out.npy`
// writes it: "<u8" (uint64: the virtual image's exact sums, each below 2^53) or "<f8" (float64).
export function npyBlob(descr: "<u8" | "<f8", shape: number[], values: ArrayLike<number>): Blob {
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape.join(", ")}${shape.length === 1 ? "," : ""}), }`;
  const total = 10 + header.length + 1;
  header += " ".repeat((64 - (total % 64)) % 64) + "\n";
  const head = new Uint8Array(10 + header.length);
  head.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]);
  new DataView(head.buffer).setUint16(8, header.length, true);
  for (let i = 0; i < header.length; i++) head[10 + i] = header.charCodeAt(i);
  const data = new DataView(new ArrayBuffer(values.length * 8));
  for (let i = 0; i < values.length; i++) {
    if (descr === "<f8") data.setFloat64(i * 8, values[i], true);
    else data.setBigUint64(i * 8, BigInt(values[i]), true);
  }
  return new Blob([head, data.buffer], { type: "application/octet-stream" });
}
