// One computation in flight, the latest request next: what the acquisition page does while a detector or a slider
// is dragged. The returned function runs `body` now, or, when called while it runs, once more after it (however
// many calls came meanwhile: each run reads the current settings). `target.dataset.state` is "loading" while it
// runs, then "ready", or "error" with the error shown under `context`, or "cancelled" when the user cancelled the
// server's work (server_progress.ts: a 409 "cancelled"), which is what was asked for, not an error.
import { ApiError } from "../api";
import { showError } from "../dom";

/** Whether `e` is the server's answer to a cancelled request (DELETE /api/progress/…). */
export function wasCancelled(e: unknown): boolean {
  return e instanceof ApiError && e.status === 409 && /^(409: )?cancelled:/.test(e.message);
}

export function latestWins(body: () => Promise<void>, target: HTMLElement, context: string): () => Promise<void> {
  let inFlight = false;
  let pending = false;
  return async () => {
    if (inFlight) {
      pending = true;
      return;
    }
    inFlight = true;
    target.dataset.state = "loading";
    try {
      do {
        pending = false;
        await body();
      } while (pending);
      target.dataset.state = "ready";
    } catch (e) {
      target.dataset.state = wasCancelled(e) ? "cancelled" : "error";
      if (!wasCancelled(e)) showError(e, context);
    } finally {
      inFlight = false;
    }
  };
}
