// One computation in flight, the latest request next: what the acquisition page does while a detector or a slider
// is dragged. The returned function runs `body` now, or, when called while it runs, once more after it (however
// many calls came meanwhile: each run reads the current settings). `target.dataset.state` is "loading" while it
// runs, then "ready", or "error" with the error shown under `context`.
import { showError } from "../dom";

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
      target.dataset.state = "error";
      showError(e, context);
    } finally {
      inFlight = false;
    }
  };
}
