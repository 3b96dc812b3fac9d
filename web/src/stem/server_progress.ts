// Progress and Cancel for a request the server computes (a product, an SSB preview or fit, a movie): the page names
// it with progress_id=TOKEN, polls GET /api/progress/TOKEN every 250 ms once it has run 300 ms (quick requests show
// nothing) and shows the stage, work done of work planned and seconds on a line with a bar and Cancel (DELETE
// /api/progress/TOKEN: the request then ends with 409 "cancelled"). The line keeps the last request's outcome;
// `last` holds its final entry (docs/api.md "Progress of named requests").
import { apiUrl, getJson } from "../api";
import { el } from "../dom";

export interface ProgressEntry {
  id: string;
  /** False while the server has not seen the request (still on its way). */
  seen: boolean;
  stage: string;
  done: number;
  total: number;
  seconds: number;
  finished: boolean;
  outcome: "done" | "failed" | "cancelled" | null;
  cancel_requested: boolean;
}

let counter = 0;

export class ServerProgress {
  readonly element: HTMLElement;
  /** The final entry of the last request run, and every entry seen while it ran (for tests). */
  last: ProgressEntry | null = null;
  seen: ProgressEntry[] = [];
  private readonly text = el("span", {});
  private readonly bar = el("progress", { max: "1" }) as HTMLProgressElement;
  private readonly cancel = el("button", { type: "button", hidden: "" }, "Cancel");
  private id = "";

  constructor(readonly elementId: string) {
    this.cancel.id = `${elementId}-cancel`;
    this.element = el("p", { class: "status server-progress", id: elementId, hidden: "" }, this.text, " ", this.bar, " ", this.cancel);
    this.cancel.addEventListener("click", () => {
      if (this.id) void fetch(apiUrl(`/api/progress/${this.id}`), { method: "DELETE" });
    });
  }

  /** Runs `call` with the progress_id parameter to add to its request, showing its progress under `label`. */
  async run<T>(label: string, call: (named: Record<string, string>) => Promise<T>): Promise<T> {
    const id = `p${Date.now().toString(36)}-${(counter++).toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    this.id = id;
    this.seen = [];
    let running = true;
    let timer = 0;
    const show = (e: ProgressEntry) => {
      if (this.id !== id) return;
      const amount = e.total ? ` ${e.done} of ${e.total}` : e.done ? ` ${e.done}` : "";
      this.text.textContent = `${label}: ${e.stage}${amount}, ${e.seconds.toFixed(1)} s`;
      if (e.total) this.bar.value = Math.min(1, e.done / e.total);
      else this.bar.removeAttribute("value");
      this.element.hidden = false;
      this.cancel.hidden = e.finished;
    };
    const tick = async () => {
      const e = await getJson<ProgressEntry>(`/api/progress/${id}`).catch(() => null);
      if (!running) return;
      if (e?.seen) (this.seen.push(e), show(e));
      else if (this.id === id) {
        // Not seen by the server yet (still on its way, or queued in front of it): Cancel already works, the
        // server refuses the request as cancelled when it arrives.
        this.text.textContent = `${label}: sent, waiting for the server's first report`;
        this.bar.removeAttribute("value");
        this.element.hidden = false;
        this.cancel.hidden = false;
      }
      timer = window.setTimeout(() => void tick(), 250);
    };
    timer = window.setTimeout(() => void tick(), 300);
    try {
      return await call({ progress_id: id });
    } finally {
      running = false;
      window.clearTimeout(timer);
      const e = await getJson<ProgressEntry>(`/api/progress/${id}`).catch(() => null);
      if (e?.seen && this.id === id) {
        this.last = e;
        this.element.dataset.outcome = e.outcome ?? "";
        if (e.outcome === "cancelled") show({ ...e, stage: "cancelled" });
        else if (this.seen.length) show(e);  // a request long enough to have shown its progress keeps its last line
        this.cancel.hidden = true;
      }
    }
  }
}
