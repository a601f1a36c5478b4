"""Route watchers (``WatchTopicRoutes``): who watches which topic, and what each one has not seen yet.

The route table reports every change as ``(route revision, changed topics)`` (see
:data:`~namesrv_grpc.core.route_tables.RouteListener`); :meth:`RouteWatchHub.routes_changed` marks the
topic pending on every watcher of it and wakes the watcher. A watcher is never a queue of messages:
it holds one dict ``topic -> revision of the newest change not sent yet``, so however slowly it reads,
it costs at most one entry per watched topic, and what it gets next is the latest route of each
changed topic (coalesced, latest wins).

Per topic the hub keeps one encoded value (``encode(topic)``, e.g. a serialized
``TopicRouteChange``) with the revision it is known to be at least as new as; a change drops it, the
next watcher that needs it encodes it again, and every other watcher of the topic reuses it (one
change fanned out to 10,000 watchers is encoded once). A watch in zone mode (S39, ``zone_name``) gets
the routes filtered to its zone: the hub keeps one encoded value per topic and watched zone (zones
compared in lower case), so watchers of one zone share it too.

Revisions: a serving process applies every change to its replica on its event loop, between
requests, so all hub state belongs to the loop's thread. A route read after a change's revision
was published contains that change, so a notification that arrives after the watcher already sent
a route at least that new is skipped (no duplicate, no loss).

Bounds (configuration, read when a watch opens; each serving process has its own hub, so each
bound is per serving process): ``routeWatchMaxWatchers`` open watches (default 20,000),
``routeWatchMaxTopics`` topics per watch (default 1,000), and the watcher-topic pairs, the unit of
what a watch costs (memory and work per change): ``routeWatchMaxTopicsPerPeer`` of one client IP
address (default 10,000) and ``routeWatchMaxTopicsTotal`` of all clients (default 200,000). Beyond
them a watch is refused with :class:`~namesrv_grpc.core.errors.TooManyRouteWatchersError`,
:class:`~namesrv_grpc.core.errors.LimitExceededError` or
:class:`~namesrv_grpc.core.errors.InvalidFieldError` before anything is kept.

Watchers that do not read: the stream marks its watcher *unsent* (:meth:`RouteWatchHub.sending`)
while a message waits for the client to take it, and clears the mark when it does
(:meth:`RouteWatchHub.sent`). The first change that finds a watcher unsent takes it off every topic
it watches (once, O(its topics)); from then on changes cost it nothing (2,000 watchers of the same
1,000 topics that never read made each registration take 1.5 s, marking 2 million pending entries).
When its client reads again it is put back with every topic pending, so it gets the current route of
each (nothing is lost, as with any coalesced change). A watcher left unsent for
``routeWatchMaxUnreadMillis`` (default 30 s) is dropped: the hub forgets it (its pairs are free for
others) and calls the ``on_unread`` given to :meth:`RouteWatchHub.open`, which ends its stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from namesrv_grpc.core.errors import InvalidFieldError, LimitExceededError, TooManyRouteWatchersError
from namesrv_grpc.core.validation import require_name
from namesrv_grpc.core.zones import zone_requested

T = TypeVar("T")


def watched_topics(topics: Sequence[str], max_topics: int) -> tuple[str, ...]:
    """The topics of a watch or batch lookup, checked and deduplicated (first occurrence kept).

    Raises InvalidFieldError: see :func:`check_topic_count` and :func:`require_topic_names`.
    """
    check_topic_count(topics, max_topics)
    unique = tuple(dict.fromkeys(topics))
    require_topic_names(topics)
    return unique


def check_topic_count(topics: Sequence[str], max_topics: int) -> None:
    """Check how many entries ``topics`` has, without reading one (a protobuf repeated field builds
    a Python string per entry read: ~0.1 ms for 1,000).

    Raises InvalidFieldError: ``topics`` empty, or more than ``max_topics`` entries (counted before
    deduplication, so the cost of checking is bounded too).
    """
    count = len(topics)
    if count == 0:
        raise InvalidFieldError("topics", "must list at least one topic")
    if count > max_topics:
        raise InvalidFieldError(
            "topics", f"lists {count} topics; at most {max_topics} per request (routeWatchMaxTopics)"
        )


def require_topic_names(topics: Sequence[str]) -> None:
    """Raises InvalidFieldError (field ``topics[i]``) for the first invalid topic name."""
    for index, topic in enumerate(topics):
        require_name(f"topics[{index}]", topic)


@dataclass(eq=False)
class RouteWatcher:
    """One open watch. Only the hub and the stream that owns it touch it (in the event loop)."""

    topics: tuple[str, ...]
    pending: dict[str, int] = field(default_factory=dict)
    """topic -> revision of the newest change of it not sent yet (0 = send the current route)."""
    sent: dict[str, int] = field(default_factory=dict)
    """topic -> revision the last route sent for it was at least as new as."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    revision: int = 0
    """Revision of the last message taken; messages never go back."""
    closed: bool = False
    """The server is shutting down: the stream should end."""
    zone_name: str = ""
    """Zone mode (S39): routes filtered to this zone; "" = whole routes."""
    peer: str = ""
    """Who opened it (the client's IP address): ``routeWatchMaxTopicsPerPeer`` counts per peer."""
    unsent: bool = False
    """A message taken by the stream waits for the client to read it (:meth:`RouteWatchHub.sending`)."""
    detached: bool = False
    """Taken off its topics while unsent: changes skip it; put back with every topic pending."""
    unread_timer: asyncio.TimerHandle | None = None
    on_unread: Callable[[RouteWatcher], None] | None = None
    """Called when the watcher is dropped for being unsent ``routeWatchMaxUnreadMillis``."""
    dropped: bool = False
    """Dropped for not reading: its stream should end."""


class RouteWatchHub(Generic[T]):
    """Every open watch of one NameServer. Create in (or before) the event loop; call
    :meth:`routes_changed` from any thread; everything else from the loop's thread."""

    def __init__(
        self,
        encode: Callable[[str], T],
        revision: Callable[[], int],
        *,
        max_watchers: Callable[[], int],
        max_topics: Callable[[], int],
        encode_in_zone: Callable[[str, str], T] | None = None,
        max_topics_per_peer: Callable[[], int] | None = None,
        max_topics_total: Callable[[], int] | None = None,
        max_unread_seconds: Callable[[], float] | None = None,
        refused: Callable[[str], None] | None = None,
    ) -> None:
        """``encode(topic)`` returns what a watcher is sent for the topic's current route (it must
        read the route table, which is at least at ``revision()`` when called); ``max_watchers`` and
        ``max_topics`` return the current bounds. ``encode_in_zone(topic, zone name)`` does the same
        for a watch in zone mode (S39); without it zone-mode watches are refused.
        ``max_topics_per_peer``/``max_topics_total``: watcher-topic pairs of one peer / of all (None:
        no bound); ``max_unread_seconds``: how long a watcher may stay unsent before it is dropped
        (None: never); ``refused(reason)`` counts each refusal and drop (``watch_topics_per_peer``,
        ``watch_topics``, ``watch_unread``)."""
        self._encode = encode
        self._encode_in_zone = encode_in_zone
        self._zones: dict[str, dict[str, int]] = {}
        """topic -> {lower-case zone -> open zone-mode watches of the topic in that zone}."""
        self._revision = revision
        self._max_watchers = max_watchers
        self._max_topics = max_topics
        self._by_topic: dict[str, set[RouteWatcher]] = {}
        self._encoded: dict[tuple[str, str], tuple[int, T]] = {}
        """(topic, lower-case zone or "") -> (revision the value is at least as new as, value)."""
        self._watchers: set[RouteWatcher] = set()
        self._max_topics_per_peer = max_topics_per_peer
        self._max_topics_total = max_topics_total
        self._max_unread_seconds = max_unread_seconds
        self.refused = refused
        """Counts refusals and drops by reason; settable after construction (the metrics' owner)."""
        self._pairs = 0
        """Watcher-topic pairs of the open watches."""
        self._pairs_by_peer: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def watchers(self) -> int:
        """Watches open now."""
        return len(self._watchers)

    @property
    def watched_topics(self) -> int:
        """Distinct topics watched now (by watchers that read)."""
        return len(self._by_topic)

    @property
    def watched_pairs(self) -> int:
        """Watcher-topic pairs of the open watches (what ``routeWatchMaxTopicsTotal`` bounds)."""
        return self._pairs

    def pairs_of(self, peer: str) -> int:
        """Watcher-topic pairs of ``peer``'s open watches."""
        return self._pairs_by_peer.get(peer, 0)

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run the hub's timers on ``loop`` (the server's); called once the loop runs."""
        self._loop = loop

    # ------------------------------------------------------------------ watches

    def open(
        self,
        topics: Sequence[str],
        zone_name: str = "",
        peer: str = "",
        on_unread: Callable[[RouteWatcher], None] | None = None,
    ) -> RouteWatcher:
        """Start a watch of ``topics`` for ``peer`` (the client's IP address): every topic is
        pending, so the first :meth:`take` returns the current route of each. ``zone_name`` not
        blank = the routes filtered to that zone (S39). ``on_unread(watcher)``: called when the
        watcher is dropped for leaving a message unread ``routeWatchMaxUnreadMillis`` (it should end
        the stream). Raises InvalidFieldError (see :func:`watched_topics`; ``zone_name`` not a name),
        TooManyRouteWatchersError and LimitExceededError (``routeWatchMaxTopicsPerPeer``,
        ``routeWatchMaxTopicsTotal``), keeping nothing. The bounds are checked before the topic
        names, and a client already at a pair bound is refused before its topics are read: a flood
        of watches past a bound costs no per-topic work (issue 30, row 12l)."""
        check_topic_count(topics, self._max_topics())
        zone = ""
        if zone_requested(zone_name):
            zone = require_name("zone_name", zone_name)
            if self._encode_in_zone is None:
                raise InvalidFieldError("zone_name", "zone mode is not served by this watch hub")
        limit = self._max_watchers()
        if len(self._watchers) >= limit:
            raise TooManyRouteWatchersError(
                f"{len(self._watchers)} route watches are open, the most this NameServer allows "
                f"(routeWatchMaxWatchers={limit}); try another NameServer or later",
                {"max_watchers": str(limit)},
            )
        self._check_pairs(peer, 1)  # a watch has at least one topic: no need to read them to refuse it
        unique = tuple(dict.fromkeys(topics))
        self._check_pairs(peer, len(unique))
        require_topic_names(topics)
        if self._loop is None:
            self.attach(asyncio.get_running_loop())
        watcher = RouteWatcher(unique, pending=dict.fromkeys(unique, 0), zone_name=zone, peer=peer, on_unread=on_unread)
        watcher.wake.set()
        self._watchers.add(watcher)
        self._pairs += len(unique)
        self._pairs_by_peer[peer] = self._pairs_by_peer.get(peer, 0) + len(unique)
        for topic in unique:
            self._by_topic.setdefault(topic, set()).add(watcher)
            if zone:
                zones = self._zones.setdefault(topic, {})
                zones[zone.lower()] = zones.get(zone.lower(), 0) + 1
        return watcher

    def _check_pairs(self, peer: str, count: int) -> None:
        """Raise LimitExceededError when ``count`` more pairs of ``peer`` would pass a bound."""
        if self._max_topics_per_peer is not None:
            limit = self._max_topics_per_peer()
            held = self._pairs_by_peer.get(peer, 0)
            if held + count > limit:
                self._refuse("watch_topics_per_peer")
                raise LimitExceededError(
                    "routeWatchMaxTopicsPerPeer",
                    f"{peer or 'this client'} watches {held} topics in its open watches; {count} more would pass "
                    f"the {limit} one client address may watch (routeWatchMaxTopicsPerPeer); "
                    "end a watch or watch fewer topics",
                )
        if self._max_topics_total is not None:
            limit = self._max_topics_total()
            if self._pairs + count > limit:
                self._refuse("watch_topics")
                raise LimitExceededError(
                    "routeWatchMaxTopicsTotal",
                    f"open watches watch {self._pairs} topics in all; {count} more would pass the {limit} this "
                    "NameServer process serves (routeWatchMaxTopicsTotal); try another NameServer or later",
                )

    def _refuse(self, reason: str) -> None:
        if self.refused is not None:
            self.refused(reason)

    def close(self, watcher: RouteWatcher) -> None:
        """End a watch (its stream ended for any reason); forget everything it held."""
        if watcher not in self._watchers:
            return
        self._watchers.discard(watcher)
        self._pairs -= len(watcher.topics)
        left = self._pairs_by_peer.get(watcher.peer, 0) - len(watcher.topics)
        if left > 0:
            self._pairs_by_peer[watcher.peer] = left
        else:
            self._pairs_by_peer.pop(watcher.peer, None)
        if watcher.unread_timer is not None:
            watcher.unread_timer.cancel()
            watcher.unread_timer = None
        zone = watcher.zone_name.lower()
        for topic in watcher.topics:
            if zone:
                zones = self._zones.get(topic)
                if zones is not None and zone in zones:
                    zones[zone] -= 1
                    if not zones[zone]:
                        del zones[zone]
                        self._encoded.pop((topic, zone), None)
                    if not zones:
                        del self._zones[topic]
            watchers = self._by_topic.get(topic)
            if watchers is not None:
                watchers.discard(watcher)
                if not watchers:
                    del self._by_topic[topic]
                    self._encoded.pop((topic, ""), None)
        watcher.pending.clear()
        watcher.sent.clear()

    def sending(self, watcher: RouteWatcher) -> None:
        """The stream hands the watcher's message to gRPC: until :meth:`sent`, the watcher is
        unsent (changes take it off its topics; after ``routeWatchMaxUnreadMillis`` it is dropped)."""
        watcher.unsent = True
        if self._max_unread_seconds is not None and self._loop is not None:
            watcher.unread_timer = self._loop.call_later(self._max_unread_seconds(), self._unread, watcher)

    def sent(self, watcher: RouteWatcher) -> None:
        """The client took the message (gRPC asks for the next one): the watcher reads again; if it
        was taken off its topics meanwhile, it is put back with every topic pending."""
        watcher.unsent = False
        if watcher.unread_timer is not None:
            watcher.unread_timer.cancel()
            watcher.unread_timer = None
        if watcher.detached and watcher in self._watchers:
            watcher.detached = False
            for topic in watcher.topics:
                self._by_topic.setdefault(topic, set()).add(watcher)
            # Every topic, at least as new as now: an encoding older than that is made again.
            watcher.pending = dict.fromkeys(watcher.topics, self._revision())
            watcher.sent.clear()
            watcher.wake.set()

    def _detach(self, watchers: Iterable[RouteWatcher]) -> None:
        """Take unsent watchers off their topics (changes skip them until :meth:`sent`)."""
        for watcher in watchers:
            watcher.detached = True
            watcher.pending.clear()
            for topic in watcher.topics:
                same = self._by_topic.get(topic)
                if same is not None:
                    same.discard(watcher)
                    if not same:  # changes of it are not seen any more: its encodings would go stale
                        del self._by_topic[topic]
                        self._encoded.pop((topic, ""), None)
                        for zone in self._zones.get(topic, ()):
                            self._encoded.pop((topic, zone), None)

    def _unread(self, watcher: RouteWatcher) -> None:
        watcher.unread_timer = None
        if not watcher.unsent or watcher not in self._watchers:
            return
        self._refuse("watch_unread")
        self.close(watcher)
        watcher.dropped = True
        watcher.wake.set()
        if watcher.on_unread is not None:
            watcher.on_unread(watcher)

    def close_all(self) -> None:
        """Server shutdown: mark every watch closed and wake it, so its stream ends."""
        for watcher in self._watchers:
            watcher.closed = True
            watcher.wake.set()

    def take(self, watcher: RouteWatcher) -> tuple[int, list[tuple[str, T]]] | None:
        """What the watcher has not seen: ``(revision, [(topic, encoded route)])`` in watch order,
        or None when nothing new (every pending change was already sent). Clears its pending set."""
        watcher.wake.clear()
        pending = watcher.pending
        if not pending:
            return None
        watcher.pending = {}
        sent = watcher.sent
        revision = watcher.revision
        changes: list[tuple[str, T]] = []
        now: int | None = None
        zone_name = watcher.zone_name
        zone = zone_name.lower()
        for topic in watcher.topics if len(pending) == len(watcher.topics) else pending:
            wanted = pending.get(topic)
            if wanted is None or (wanted and sent.get(topic, -1) >= wanted):
                continue  # already sent a route at least that new
            cached = self._encoded.get((topic, zone))
            if cached is None or cached[0] < wanted:
                if now is None:
                    now = self._revision()  # read before encoding: the route is at least this new
                if zone and self._encode_in_zone is not None:
                    cached = (now, self._encode_in_zone(topic, zone_name))
                else:
                    cached = (now, self._encode(topic))
                self._encoded[(topic, zone)] = cached
            sent[topic] = cached[0]
            revision = max(revision, cached[0])
            changes.append((topic, cached[1]))
        if not changes:
            return None
        watcher.revision = revision
        return revision, changes

    async def next(self, watcher: RouteWatcher) -> tuple[int, list[tuple[str, T]]] | None:
        """Wait until the watcher has something new and :meth:`take` it; None when the watch was
        closed by :meth:`close_all`."""
        while True:
            await watcher.wake.wait()
            if watcher.closed or watcher.dropped:
                return None
            taken = self.take(watcher)
            if taken is not None:
                return taken

    # ------------------------------------------------------------------ changes

    def routes_changed(self, revision: int, topics: Iterable[str] | None) -> None:
        """A :data:`~namesrv_grpc.core.route_tables.RouteListener`, called on the loop's thread;
        ``topics`` None = every topic changed."""
        if not self._watchers:
            return  # a watch opened later reads the routes after this change anyway
        self._mark(revision, topics)

    def _mark(self, revision: int, topics: Iterable[str] | None) -> None:
        unsent: list[RouteWatcher] = []
        if topics is None:
            self._encoded.clear()
            for watcher in self._watchers:
                if watcher.detached:
                    continue
                if watcher.unsent:
                    unsent.append(watcher)
                    continue
                for topic in watcher.topics:
                    watcher.pending[topic] = max(revision, watcher.pending.get(topic, 0))
                watcher.wake.set()
            self._detach(unsent)
            return
        by_topic = self._by_topic
        changed = topics if isinstance(topics, set | frozenset) else frozenset(topics)
        for topic in by_topic.keys() & changed:  # walks the smaller of the two (a registration may change 100,000)
            watchers = by_topic[topic]
            if not watchers:
                continue
            self._encoded.pop((topic, ""), None)
            for zone in self._zones.get(topic, ()):
                self._encoded.pop((topic, zone), None)
            for watcher in watchers:
                if watcher.unsent:
                    unsent.append(watcher)
                    continue
                pending = watcher.pending
                if pending.get(topic, 0) < revision:
                    pending[topic] = revision
                watcher.wake.set()
        if unsent:
            self._detach(set(unsent))
