"""Grade a campaign's pooled pairs with an automatic judge behind an OpenAI-compatible endpoint."""

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from tqdm import tqdm

from judging.management.commands._base import CampaignCommand
from judging.services.model_judge import (
    API_KEY_ENV,
    ENDPOINT_ENV,
    PAIR_MODES,
    Endpoint,
    model_judge_get_or_create,
    model_judge_run,
    pairs_to_judge,
)


class Command(CampaignCommand):
    help = (
        "Ask a model (any OpenAI-compatible chat-completions endpoint) to grade the campaign's pooled pairs, "
        "with a prompt built from the guidelines, the query and its description, and the document. Its grades "
        f"are stored as the judgments of the model judge NAME, never as human labels. The endpoint comes from "
        f"--endpoint or {ENDPOINT_ENV}, the key from {API_KEY_ENV}; nothing is called unless one is set."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", help="the campaign's slug")
        parser.add_argument("--endpoint", help=f"base URL or .../chat/completions URL (default: ${ENDPOINT_ENV})")
        parser.add_argument("--model", required=True, help="the model name sent to the endpoint")
        parser.add_argument("--name", help="the judge's name as an annotator (default: the model name)")
        parser.add_argument("--description", default="", help="what to remember about this judge (prompt, model)")
        parser.add_argument("--pairs", default="unjudged", help=f"which pairs: {', '.join(PAIR_MODES)}")
        parser.add_argument("--seed", type=int, default=0, help="random seed of --pairs sample:N")
        parser.add_argument("--concurrency", type=int, default=8, help="requests in flight (default 8)")
        parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
        parser.add_argument("--retries", type=int, default=4, help="retries of a failed request (default 4)")

    def handle(self, *args, slug, endpoint, model, name, description, pairs, seed, concurrency, timeout, retries, **o):
        campaign = self.campaign(slug)
        if concurrency < 1 or retries < 0 or timeout <= 0:
            raise CommandError("--concurrency must be >= 1, --retries >= 0 and --timeout > 0")
        try:
            target = Endpoint.configured(url=endpoint, model=model, timeout=timeout, retries=retries)
            judge = model_judge_get_or_create(
                name=name or model, description=description or f"{model} at {target.url}", campaign=campaign
            )
            pair_ids = pairs_to_judge(campaign=campaign, judge=judge, mode=pairs, seed=seed)
        except (ValueError, ValidationError) as exc:
            raise CommandError(exc.messages[0] if isinstance(exc, ValidationError) else str(exc)) from None
        if not pair_ids:
            self.stdout.write(f"{judge.username}: no pairs to judge ({pairs})")
            return
        bar = tqdm(total=len(pair_ids), unit="pairs", file=self.stderr._out, disable=len(pair_ids) < 20)
        try:
            summary = model_judge_run(
                campaign=campaign,
                judge=judge,
                endpoint=target,
                pair_ids=pair_ids,
                concurrency=concurrency,
                progress=bar.update,
            )
        finally:
            bar.close()
        for line in summary.lines():
            self.stdout.write(line)
        if summary.failed == summary.pairs:
            raise CommandError(f"every call failed; is {target.url} answering?")
