"""What every persistence backend shares: the stored-session types, the one set of errors, §9.1's
urgency rule, the hook wiring, the batch and urgent writers of a database backend and its journals and
live-session bookkeeping (``Journal``, ``JournaledStore``), and the fast,
strict reading of stored events (one row per event: ``decode_event_rows``, ``check_stored_events``).

A backend implements ``dsh_core.SessionPersistence`` (read and write sides), raises these errors,
returns these types (or subclasses adding what only it knows), and starts with
``serve_session_store``. ``dsh_core.testing.check_session_store`` is its conformance suite; the
plugin guide's "Writing a persistence backend" walks through it.
"""

from ._decoding import decode_frozen as decode_frozen
from ._decoding import gc_paused as gc_paused
from ._decoding import loads_strict as loads_strict
from ._decoding import title_of as title_of
from ._errors import PersistenceError as PersistenceError
from ._errors import SessionAccessError as SessionAccessError
from ._errors import SessionConflictError as SessionConflictError
from ._errors import SessionCorruptError as SessionCorruptError
from ._errors import SessionFencedError as SessionFencedError
from ._errors import SessionFormatError as SessionFormatError
from ._errors import SessionInUseError as SessionInUseError
from ._errors import SessionNotFoundError as SessionNotFoundError
from ._errors import SessionWriteError as SessionWriteError
from ._errors import StoreUnavailableError as StoreUnavailableError
from ._hooks import SessionStoreHooks as SessionStoreHooks
from ._hooks import serve_session_store as serve_session_store
from ._journaled import ClaimingDatabase as ClaimingDatabase
from ._journaled import Journal as Journal
from ._journaled import JournaledStore as JournaledStore
from ._journaled import OwnerClaim as OwnerClaim
from ._journaled import Reservation as Reservation
from ._rows import check_stored_events as check_stored_events
from ._rows import continues_log as continues_log
from ._rows import decode_event_row as decode_event_row
from ._rows import decode_event_rows as decode_event_rows
from ._rows import sound_prefix as sound_prefix
from ._types import RepairReport as RepairReport
from ._types import SessionInfo as SessionInfo
from ._types import StoredSession as StoredSession
from ._urgency import URGENT_TYPES as URGENT_TYPES
from ._urgency import is_urgent as is_urgent
from ._writers import BatchWriter as BatchWriter
from ._writers import UrgentWriter as UrgentWriter

__all__ = [
    "URGENT_TYPES",
    "BatchWriter",
    "ClaimingDatabase",
    "Journal",
    "JournaledStore",
    "OwnerClaim",
    "PersistenceError",
    "RepairReport",
    "Reservation",
    "SessionAccessError",
    "SessionConflictError",
    "SessionCorruptError",
    "SessionFencedError",
    "SessionFormatError",
    "SessionInUseError",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionStoreHooks",
    "SessionWriteError",
    "StoreUnavailableError",
    "StoredSession",
    "UrgentWriter",
    "check_stored_events",
    "continues_log",
    "decode_event_row",
    "decode_event_rows",
    "decode_frozen",
    "gc_paused",
    "is_urgent",
    "loads_strict",
    "serve_session_store",
    "sound_prefix",
    "title_of",
]
