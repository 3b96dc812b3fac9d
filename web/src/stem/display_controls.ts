// The display controls of one image on the acquisition page: transform (linear/log), colour map (the display
// kernels' matplotlib maps) and limits (full range, 0.5–99.5 %, or two numbers typed in the transformed units).
// Element ids are `${prefix}-transform`, `-cmap`, `-limits`, `-lo`, `-hi`; `onChange` runs after every edit.
import { el } from "../dom";
import { COLORMAP_NAMES } from "../webgpu/colormap_tables";
import type { GridDisplay, LimitsChoice, Transform } from "./grid_draw";

export function displayControls(prefix: string, initial: GridDisplay, onChange: () => void): { element: HTMLElement; get: () => GridDisplay } {
  const transform = el("select", { id: `${prefix}-transform`, title: "transform" },
    ...(["linear", "log"] as const).map((t) => el("option", { value: t }, t === "log" ? "log1p" : "linear")));
  transform.value = initial.transform;
  const cmap = el("select", { id: `${prefix}-cmap`, title: "colour map" }, ...COLORMAP_NAMES.map((n) => el("option", { value: n }, n)));
  cmap.value = initial.colormap;
  const limits = el("select", { id: `${prefix}-limits`, title: "limits" },
    el("option", { value: "full" }, "full range"), el("option", { value: "robust" }, "0.5–99.5 %"), el("option", { value: "custom" }, "custom"));
  limits.value = Array.isArray(initial.limits) ? "custom" : initial.limits;
  const lo = el("input", { id: `${prefix}-lo`, type: "number", step: "any", size: "6", title: "lower limit (transformed units)" });
  const hi = el("input", { id: `${prefix}-hi`, type: "number", step: "any", size: "6", title: "upper limit (transformed units)" });
  const get = (): GridDisplay => {
    let l: LimitsChoice = limits.value as "full" | "robust";
    if (limits.value === "custom") {
      const a = Number(lo.value);
      const b = Number(hi.value);
      l = lo.value !== "" && hi.value !== "" && Number.isFinite(a) && Number.isFinite(b) && a < b ? [a, b] : "full";
    }
    return { transform: transform.value as Transform, colormap: cmap.value, limits: l };
  };
  const sync = () => {
    lo.disabled = hi.disabled = limits.value !== "custom";
    onChange();
  };
  for (const c of [transform, cmap, limits, lo, hi]) c.addEventListener("change", sync);
  lo.disabled = hi.disabled = limits.value !== "custom";
  return { element: el("span", { class: "display-controls" }, transform, cmap, limits, lo, hi), get };
}

/** Shows the limits a draw used in the custom inputs while they are not being edited (so "custom" starts from them). */
export function showLimits(prefix: string, used: [number, number]): void {
  const limits = document.getElementById(`${prefix}-limits`) as HTMLSelectElement | null;
  if (!limits || limits.value === "custom") return;
  for (const [id, v] of [[`${prefix}-lo`, used[0]], [`${prefix}-hi`, used[1]]] as const) {
    const input = document.getElementById(id) as HTMLInputElement | null;
    if (input) input.value = String(Number(v.toPrecision(5)));
  }
}
