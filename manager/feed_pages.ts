/**
 * Feed pages encoded once per view: when a change wakes thousands of followers, those that read
 * the feed alike (service/cluster_view.ts viewKey: one cluster's nodes) from the same cursor share
 * one filtered, encoded page instead of each making its own. Only pages up to the feed's newest
 * cursor are kept, and none longer than MAX_AGE_MS (what a view may see can change with no event).
 */
import type { EncodedJson } from "./encoded_json.ts";
import type { FeedPage } from "./feed.ts";

const MAX_AGE_MS = 1000;

interface Kept {
  made: number;
  answer: Promise<EncodedJson>;
}

export class FeedPages {
  /** The cursor the kept pages end at; a page ending elsewhere starts the store afresh. */
  private end = "";
  private readonly kept = new Map<string, Kept>();

  /** The page `view` reads after `after`, made by `make` unless another reader already made it. */
  answer(
    view: string,
    after: string,
    page: FeedPage,
    make: () => Promise<EncodedJson>,
  ): Promise<EncodedJson> {
    if (page.cursor !== this.end) {
      this.kept.clear();
      this.end = page.cursor;
    }
    const key = `${after}|${view}`;
    const now = performance.now();
    const found = this.kept.get(key);
    if (found && now - found.made < MAX_AGE_MS) return found.answer;
    const answer = make();
    this.kept.set(key, { made: now, answer });
    // A page that failed is not kept: the next reader tries again.
    answer.catch(() => {
      if (this.kept.get(key)?.answer === answer) this.kept.delete(key);
    });
    return answer;
  }
}
