"""Services for the `phloem start|stop|restart|logs` tests, loaded through `[services.extra]`:
`chatty` logs what it is told to say (its lines are attributed to it), and `pair` is a
rest_for_one supervisor of two chatty children with an intensity of 1, so a restart
charged to it would soon take it down."""

from __future__ import annotations

from typing import Any

from phloem.actors.services import DEFER, Call, ServiceActor, ServiceContext
from phloem.base.logs import get_logger
from phloem.supervision.reasons import ExitReason
from phloem.supervision.spec import ChildSpec, SupervisorChild, SupervisorSpec

log = get_logger("tests.chatty")

PAIR_INTENSITY = 1
PAIR_PERIOD_S = 600.0


class ChattyService(ServiceActor):
    """`{"say": text}` logs `chatty_said` with that text; `{"die": true}` replies, then
    ends abnormally (its supervisor restarts it)."""

    def handle(self, message: Any, call: Call) -> Any:
        if isinstance(message, dict) and "say" in message:
            log.info("chatty_said", text=str(message["say"]))
            return "said"
        if isinstance(message, dict) and message.get("die"):
            call.reply("dying")
            self.exit(ExitReason.from_exception(RuntimeError("die requested")))
            return DEFER
        return message


def pair_factory(ctx: ServiceContext) -> ChildSpec:
    children = [
        ChildSpec("first", (ChattyService, (ctx,), {}), shutdown=5.0),
        ChildSpec("second", (ChattyService, (ctx,), {}), shutdown=5.0),
    ]
    spec = SupervisorSpec("rest_for_one", intensity=PAIR_INTENSITY, period_s=PAIR_PERIOD_S)
    return ChildSpec(ctx.name, SupervisorChild(spec, children))
