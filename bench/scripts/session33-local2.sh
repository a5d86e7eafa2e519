#!/usr/bin/env bash
# Thirty-third session, one H200: session33-local.sh again for build m (the one-rank copy's
# channel count out of the plan, `local_channels`; `local` out of line: the ptxas bounds
# of `plan_collective` and `exec::collective` under register caps), against build b.
exec bash bench/scripts/session33-local.sh m
