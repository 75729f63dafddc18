"""What counts as the database being unreachable, as opposed to a statement it refused."""

import asyncpg
from sqlalchemy import exc as sa_exc

from federation.store.database import is_collision, is_outage


def _wrapped(cause: BaseException) -> sa_exc.DBAPIError:
    driver = Exception("driver error")
    driver.__cause__ = cause
    return sa_exc.DBAPIError("SELECT 1", {}, driver)


def test_a_connection_lost_mid_statement_is_an_outage() -> None:
    assert is_outage(_wrapped(asyncpg.exceptions.ConnectionDoesNotExistError("closed")))
    assert is_outage(ConnectionResetError())
    assert is_outage(sa_exc.DBAPIError("SELECT 1", {}, Exception(), connection_invalidated=True))


def test_a_session_the_server_ended_under_a_frozen_process_is_an_outage() -> None:
    lost = asyncpg.InternalClientError("cannot switch to state 11; another operation in progress")
    assert is_outage(_wrapped(lost))


def test_a_refused_statement_is_not() -> None:
    assert not is_outage(_wrapped(asyncpg.exceptions.UniqueViolationError("dup")))
    assert not is_outage(ValueError("no"))


def test_a_deadlock_is_a_collision_to_retry_not_an_outage() -> None:
    deadlock = _wrapped(asyncpg.exceptions.DeadlockDetectedError("deadlock detected"))
    assert is_collision(deadlock) and not is_outage(deadlock)
    assert is_collision(_wrapped(asyncpg.exceptions.SerializationError("could not serialize")))
    assert not is_collision(_wrapped(asyncpg.exceptions.UniqueViolationError("dup")))
