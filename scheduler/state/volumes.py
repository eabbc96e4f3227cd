"""PersistentVolumeClaims, PersistentVolumes and StorageClasses, kept from their informers for the volume plugins."""

from __future__ import annotations

from scheduler.model import PersistentVolume, PersistentVolumeClaim, StorageClass


class Volumes:
    """PersistentVolumeClaims by "ns/name", PersistentVolumes and StorageClasses by name (their informers').

    The volume plugins read them; the informer handlers keep them (O(1) per event). Readers never mutate them.
    """

    __slots__ = ("claims", "volumes", "classes")

    def __init__(self) -> None:
        self.claims: dict[str, PersistentVolumeClaim] = {}
        self.volumes: dict[str, PersistentVolume] = {}
        self.classes: dict[str, StorageClass] = {}

    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.claims.get(f"{namespace}/{name}")
