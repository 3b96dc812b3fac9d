// The heatmap's "Colour on: auto | page (WebGPU) | server" control and the path it resolves to:
//   - auto: the page's WebGPU adapter when gpuColorizer() opens one, else the server; a failure of the page
//     path (e.g. a server without GET /api/cells) falls back to the server for the rest of the page;
//   - page: the page's adapter; without one, the server (the label says why);
//   - server: the server's PNGs (display.colorize placed by the server).
// The choice is remembered in localStorage (tm.heatmap.colourOn); ?colour=auto|page|server in the page's
// query overrides it (heatmap_tiles.ts). The resolved path and the adapter are written to `target`'s
// dataset: data-colour-path ("webgpu" | "server", absent while deciding), data-colour-choice, data-adapter
// (the adapter's name, "" without one) and data-adapter-software ("true" for SwiftShader and the like).
import { describeError, el } from "./dom";
import { saveColourChoice, savedColourChoice, type ColourChoice, type ColourPath } from "./heatmap_tiles";
import { adapterReport, gpuColorizer } from "./webgpu/colorize";

export class ColourPathControl {
  readonly elements: HTMLElement[];
  private choice: ColourChoice = savedColourChoice();
  private current: ColourPath | null = null;
  private note = ""; // why the page path is not used, when it is not
  private readonly label: HTMLElement;
  private seq = 0;

  /** onChange is called whenever the resolved path changes (the heatmap then redraws on it). */
  constructor(private readonly target: HTMLElement, private readonly onChange: () => void) {
    const select = el("select", { id: "colour-on", title: "where the heatmap's tiles are coloured" });
    for (const [v, text] of [["auto", "auto"], ["page", "page (WebGPU)"], ["server", "server"]]) select.append(el("option", { value: v }, text));
    select.value = this.choice;
    select.addEventListener("change", () => this.choose(select.value as ColourChoice));
    this.label = el("span", { class: "colour-path", id: "colour-path" }, "colour path: deciding…");
    this.elements = [el("label", {}, "Colour on ", select), this.label];
    void this.decide();
  }

  /** The path tiles are coloured on now; null while the adapter question is being settled. */
  get path(): ColourPath | null {
    return this.current;
  }

  /** The page's colouring failed: under auto, use the server from now on. Returns whether it switched. */
  pageFailed(e: unknown): boolean {
    if (this.choice !== "auto" || this.current !== "webgpu") return false;
    console.warn("heatmap: colouring on the page failed; using the server's PNGs", e);
    this.note = "the page's colouring failed: " + describeError(e);
    this.set("server");
    return true;
  }

  private choose(c: ColourChoice): void {
    this.choice = c;
    saveColourChoice(c);
    this.current = null;
    this.onChange();
    void this.decide();
  }

  private async decide(): Promise<void> {
    const seq = ++this.seq;
    const gpu = await gpuColorizer(); // asked even for "server", to show the adapter
    if (seq !== this.seq) return;
    this.note = this.choice === "server" ? "chosen" : gpu ? "" : adapterReport()?.label ?? "webgpu: unavailable";
    this.set(this.choice !== "server" && gpu ? "webgpu" : "server");
  }

  private set(path: ColourPath): void {
    this.current = path;
    const a = adapterReport();
    Object.assign(this.target.dataset, {
      colourPath: path,
      colourChoice: this.choice,
      adapter: a?.available ? a.name : "",
      adapterSoftware: String(Boolean(a?.software)),
    });
    this.label.textContent =
      path === "webgpu" ? `coloured on this page: ${a?.label ?? "webgpu"}` : `coloured by the server${this.note ? ` (${this.note})` : ""}`;
    this.onChange();
  }
}
