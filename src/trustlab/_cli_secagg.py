"""``trustlab secure-agg serve|client``: one Janus round between real processes on loopback.

Thin like the rest of the CLI: it parses, calls :mod:`trustlab.privacy._secagg_net`, prints.
User errors and protocol aborts print one line and exit 2.
"""

from __future__ import annotations

from typing import Annotated, NoReturn

import typer

from trustlab._cli_errors import fail
from trustlab.errors import TrustlabError

secagg_app = typer.Typer(
    no_args_is_help=True,
    help="Janus dual-server verifiable secure aggregation on loopback (docs/privacy/secure-aggregation.md).",
)


def _fail(exc: TrustlabError) -> NoReturn:
    fail(exc, {})


@secagg_app.command()
def serve(
    clients: Annotated[int, typer.Option(help="Clients expected in the round.")] = 3,
    dim: Annotated[int, typer.Option(help="Length of every client's vector.")] = 4,
    port: Annotated[int, typer.Option(help="S0 listens on PORT, S1 on PORT+1 (127.0.0.1).")] = 7000,
    frac_bits: Annotated[int, typer.Option(help="Fixed-point fractional bits.")] = 16,
    bound: Annotated[float, typer.Option(help="Public clip bound on every value.")] = 1.0,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the clients.")] = 300.0,
) -> None:
    """Run both servers for one round; prints the bytes each server moved (never the sum)."""
    from trustlab.errors import ParameterError
    from trustlab.privacy._janus import JanusParams
    from trustlab.privacy._secagg_net import serve_pair

    try:
        if clients < 2:
            raise ParameterError(
                "--clients must be at least 2 (one client's sum is its input)", argument="--clients"
            )
        params = JanusParams(dim=dim, frac_bits=frac_bits, bound=bound, max_clients=clients)
        typer.echo(f"S0 on 127.0.0.1:{port}, S1 on 127.0.0.1:{port + 1}; waiting for {clients} clients")
        totals = serve_pair(params, clients, port, timeout)
    except TrustlabError as exc:
        _fail(exc)
    for who in sorted(totals):
        typer.echo(f"{who}: {totals[who]['clients']} clients aggregated, {totals[who]['bytes']} bytes")


@secagg_app.command()
def client(
    values: Annotated[str, typer.Option(help="This client's vector, comma-separated.")],
    index: Annotated[int, typer.Option(help="This client's id, unique in the round.")],
    port: Annotated[int, typer.Option(help="S0's port (S1's is announced by S0).")] = 7000,
    host: Annotated[str, typer.Option(help="The servers' host.")] = "127.0.0.1",
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the servers.")] = 300.0,
) -> None:
    """Send one vector and print the verified sum of the round."""
    import numpy as np

    from trustlab.errors import DataError
    from trustlab.privacy._secagg_net import join_round

    try:
        try:
            vec = np.array([float(v) for v in values.split(",")], dtype=float)
        except ValueError:
            raise DataError("--values must be numbers separated by commas", argument="--values") from None
        total = join_round(host, port, index, vec, timeout)
    except TrustlabError as exc:
        _fail(exc)
    typer.echo(",".join(f"{v:.6g}" for v in total))
