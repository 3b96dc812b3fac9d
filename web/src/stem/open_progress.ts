// The acquisition page's progress line (#stem-progress): shown before the page's first request, it says what
// opening is waiting for (the summary, the calibration, the server's first image, each band of the decoded block
// with its bytes, a <progress> bar and a Cancel button that stops the download, the server then computing the
// images), and at the end how long opening took to its first image and when the page's adapter took over. Every step is also kept for the end-to-end test and the time-to-first-pixel
// measurement (window.tmStemOpen; times in milliseconds from `performance.now()`'s origin, the page load).
import { el } from "../dom";
import type { BlockProgress } from "./webgpu/block";
import type { DecodeProgress } from "./webgpu/decode";

export interface OpenLog {
  /** When the acquisition's route began opening it. */
  openedAt: number;
  /** When the progress line was first in the document. */
  shownAt: number;
  /** Each line shown, with its time. */
  steps: { at: number; text: string }[];
  /** When the first virtual image was drawn (null until then). */
  firstImageAt: number | null;
}

const mib = (b: number) => (b / 2 ** 20).toFixed(1);

export class OpenProgress {
  readonly element: HTMLElement;
  readonly log: OpenLog;
  private readonly text: HTMLElement;
  private readonly bar: HTMLProgressElement;
  private readonly cancel: HTMLButtonElement;
  private controller: AbortController | null = null;
  private blockStarted = 0;
  private blockActive = false;
  private blockText = "";
  private rebuildStarted: number | null = null;
  /** True until the opening's record is written (the first build's images drawn and its block settled). */
  private opening = true;
  /** Where the first virtual image was computed. */
  private first = "";

  /** A progress line at the top of `root` (kept across the page's rebuilds), the route having begun at `openedAt`. */
  constructor(root: HTMLElement, openedAt: number) {
    this.text = el("span", { id: "stem-progress-text" });
    this.bar = el("progress", { id: "stem-progress-bar", max: "1" }) as HTMLProgressElement;
    this.cancel = el("button", { type: "button", id: "stem-progress-cancel", hidden: "" }, "Cancel");
    this.cancel.addEventListener("click", () => this.controller?.abort(new Error("the block's download was cancelled on the page")));
    this.element = el("p", { class: "status", id: "stem-progress", role: "status" }, this.text, " ", this.bar, " ", this.cancel);
    root.append(this.element);
    const now = performance.now();
    this.log = { openedAt, shownAt: now, steps: [], firstImageAt: null };
    (window as unknown as { tmStemOpen: OpenLog }).tmStemOpen = this.log;
  }

  /** A step without a measurable fraction (the bar shows activity). */
  stage(text: string): void {
    this.bar.removeAttribute("value");
    this.cancel.hidden = true;
    this.show(text);
  }

  /** The signal the next block download is given: Cancel aborts it. */
  blockSignal(): AbortSignal {
    this.controller = new AbortController();
    this.blockStarted = performance.now();
    this.blockActive = true;
    return this.controller.signal;
  }

  /** A step of the block's download (fetchBlock's onProgress). */
  block(p: BlockProgress): void {
    this.cancel.hidden = p.phase === "done";
    const seconds = ((performance.now() - this.blockStarted) / 1000).toFixed(1);
    const bytes = p.totalBytes ? `${mib(p.receivedBytes)} of ${mib(p.totalBytes)} MiB` : `${mib(p.receivedBytes)} MiB`;
    if (p.totalBytes) this.bar.value = p.receivedBytes / p.totalBytes;
    else this.bar.removeAttribute("value");
    const doing = p.phase === "decoding" ? "decoding on the server" : p.phase === "receiving" ? "arriving" : "received";
    this.blockText = p.phase === "done"
      ? `decoded block received: ${bytes} in ${p.bands} band${p.bands > 1 ? "s" : ""}, ${seconds} s; uploading it to the page's adapter`
      : `fetching the decoded block for the page's adapter: band ${p.band} of ${p.bands} ${doing}, ${bytes}, ${seconds} s`;
    this.show(this.firstText() + this.blockText, p.phase !== "receiving");
  }

  /** A window of stored chunks decoded on the page's adapter (decodeBlockOnPage's onProgress). */
  chunks(p: DecodeProgress): void {
    const seconds = ((performance.now() - this.blockStarted) / 1000).toFixed(1);
    this.bar.value = p.decodedBytes / Math.max(1, p.totalBytes);
    this.cancel.hidden = p.window === p.windows;
    this.blockText = `compressed chunks for the page's adapter: window ${p.window} of ${p.windows} decoded, ${mib(p.wireBytes)} MiB over the wire for ` +
      `${mib(p.decodedBytes)} of ${mib(p.totalBytes)} MiB, ${seconds} s`;
    this.show(this.firstText() + this.blockText);
  }

  /** The block's download ended: `onPage` when the page now computes from it (its first image then finishes the
   *  opening), else (refused, cancelled, failed) the opening is finished by the server's image already drawn. */
  blockEnded(onPage: boolean): void {
    this.blockActive = false;
    this.cancel.hidden = true;
    if (!onPage && this.opening && this.log.firstImageAt !== null) this.imageDrawn(this.first);
  }

  /** A (re)build of the page's view began: the next imageDrawn says how long it took. */
  rebuilding(): void {
    this.rebuildStarted = performance.now();
  }

  /** A virtual image is drawn. The first one is recorded; while the block still downloads the line keeps its
   *  progress (prefixed with that first image's time); then the line ends as the record of the opening: when the
   *  first image came, and where later ones are computed. After a rebuild of the view, how long that took. */
  imageDrawn(where: string): void {
    const now = performance.now();
    if (this.log.firstImageAt === null) {
      this.log.firstImageAt = now;
      this.first = where;
    }
    if (this.blockActive) {
      this.show(this.firstText() + this.blockText);
      return;
    }
    const t = (at: number) => ((at - this.log.openedAt) / 1000).toFixed(2);
    if (this.opening) {
      this.opening = false;
      this.finish(`opened: first virtual image ${t(this.log.firstImageAt)} s after opening (${this.first})` +
        (where !== this.first ? `; ${where} from ${t(now)} s` : ""));
    } else if (this.rebuildStarted !== null) {
      this.finish(`view ready: its first virtual image ${((now - this.rebuildStarted) / 1000).toFixed(2)} s after choosing it (${where})`);
    }
    this.rebuildStarted = null;
  }

  private firstText(): string {
    return this.log.firstImageAt === null ? "" : `first virtual image ${((this.log.firstImageAt - this.log.openedAt) / 1000).toFixed(2)} s after opening (${this.first}); `;
  }

  private finish(text: string): void {
    this.bar.value = 1;
    this.cancel.hidden = true;
    this.show(text);
    this.element.dataset.state = "done";
  }

  private show(text: string, record = true): void {
    this.text.textContent = text;
    this.element.dataset.state = "busy";
    if (record) this.log.steps.push({ at: performance.now(), text });
  }
}
