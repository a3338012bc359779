"""Messages of the instructions feature that cross a process boundary.

`ConfirmRequest` is the item a run's event stream carries when a mutating tool call
waits for its owner's approval (kind `confirm`): the run's owner answers it with the
call id (`client.confirm_agent_run(ref, call_id, approve)`, and for harness sessions
`client.session_confirm(session_id, call_id, approve)`). The arguments are pruned of
credential-shaped keys and redacted before they leave the daemon.
"""

from __future__ import annotations

from typing import Any

import msgspec


class ConfirmRequest(msgspec.Struct, frozen=True, tag="confirm"):
    call_id: str
    tool: str
    args: dict[str, Any]
    agent: str = ""
    timeout_s: float = 60.0

    @property
    def kind(self) -> str:
        return "confirm"
