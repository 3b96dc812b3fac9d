// The tensor page's "Profile" section (#profile): every value of one row or column of the tensor's view (GET
// /api/profile/…, exact float64) as a line plot (profile_plot.ts); a 1-D tensor (a view of one row) is plotted
// at once.
import { getBinary, tensorPath, type Pyramid } from "./api";
import { el } from "./dom";
import { ProfilePlot } from "./profile_plot";

export function tensorProfile(ckpt: string, name: string, pyramid: Pyramid, slice: () => number): HTMLElement {
  const { rows, cols } = pyramid.view;
  const axis = el("select", { id: "profile-axis", title: "a row or a column" }, el("option", { value: "row" }, "row"), el("option", { value: "col" }, "column"));
  const index = el("input", { id: "profile-index", type: "number", min: "0", step: "1", value: "0", size: "8", title: "its index" });
  const plot = el("button", { type: "button", id: "profile-plot-button" }, "Plot");
  const status = el("span", { class: "hint", id: "profile-status" });
  const chart = new ProfilePlot("profile-plot");
  const box = el("div", { class: "profile", id: "profile", "data-state": "idle" }, el("div", { class: "toolbar" }, "values of ", axis, " ", index, " ", plot, " ", status), chart.element);
  const run = async () => {
    const along = axis.value as "row" | "col";
    const extent = along === "row" ? rows : cols;
    const at = Number(index.value);
    if (!Number.isInteger(at) || at < 0 || at >= extent) {
      status.textContent = ` ${along === "row" ? "rows" : "columns"} are 0 to ${extent - 1}`;
      return;
    }
    box.dataset.state = "loading";
    status.textContent = " reading…";
    try {
      const s = slice();
      const { buffer } = await getBinary(tensorPath("profile", ckpt, name), { [along]: at, ...(pyramid.view.slices > 1 ? { slice: s } : {}) });
      const values = new Float64Array(buffer);
      const where = `${along === "row" ? "row" : "column"} ${at}${pyramid.view.slices > 1 ? ` of slice ${s}` : ""}`;
      chart.show({ title: rows === 1 ? `${name}: its values` : `${name}: ${where}`, values, xLabel: along === "row" ? "column" : "row", xExtent: values.length, yLabel: "value",
        note: "exact values read from the checkpoint (dequantized or widened to float64)" });
      status.textContent = "";
      box.dataset.state = "ready";
      box.dataset.shown = `${along},${at}`;
    } catch (e) {
      status.textContent = ` cannot plot: ${e instanceof Error ? e.message : String(e)}`;
      box.dataset.state = "error";
    }
  };
  plot.addEventListener("click", () => void run());
  index.addEventListener("change", () => void run());
  if (rows === 1) void run();  // a 1-D tensor: its values are the plot
  return box;
}
