// Number and size formatting for tables and read-outs.
import { num, type Num } from "./api";

/** A value to 6 significant digits; NaN and infinities spelled out. */
export function fmt(v: Num | number | null | undefined): string {
  if (v === null || v === undefined) return "";
  const x = typeof v === "number" ? v : num(v);
  if (Number.isNaN(x)) return "NaN";
  if (!Number.isFinite(x)) return x > 0 ? "+inf" : "-inf";
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (a >= 1e6 || a < 1e-4) return x.toExponential(5).replace(/\.?0+e/, "e");
  return String(Number(x.toPrecision(6)));
}

/** An integer count with thousands separators. */
export function fmtInt(n: number): string {
  return n.toLocaleString("en-US");
}

export function fmtBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let u = 0;
  let x = n;
  while (x >= 1024 && u < units.length - 1) {
    x /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${x.toFixed(1)} ${units[u]}`;
}

export function fmtShape(shape: number[]): string {
  return `[${shape.join(", ")}]`;
}
