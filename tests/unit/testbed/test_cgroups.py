# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulated fleet gives every node a cgroup tree of its own (tests/testbed/testbed.py)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import sys

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT

sys.path.insert(0, os.path.join(ROOT, 'tests', 'testbed'))

import testbed  # noqa: E402


# -- per-node cgroups (testbed.py) -----------------------------------------------------------------------------------

HYBRID_MOUNTINFO = """\
35 25 0:30 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
36 35 0:31 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
37 35 0:32 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
38 35 0:33 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:12 - cgroup cgroup rw,memory
"""
V2_MOUNTINFO = "30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"


@pytest.mark.parametrize('mountinfo, own, expected', [
    (HYBRID_MOUNTINFO, '9:name=systemd:/\n4:memory:/x\n0::/\n',
     [('/sys/fs/cgroup/systemd', ''), ('/sys/fs/cgroup/unified', '')]),
    # a runner started from inside a service keeps that service's cgroup as the parent
    (V2_MOUNTINFO, '0::/system.slice/ci.service\n', [('/sys/fs/cgroup', '/system.slice/ci.service')]),
    # started from inside a node's cgroup: never nested under it
    (V2_MOUNTINFO, '0::/testbed-nptb/el9-b200-01/supervisor\n', [('/sys/fs/cgroup', '')]),
    # no systemd hierarchy at all: nothing to join (the node then shares cgroups, with a warning)
    ('38 35 0:33 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n', '4:memory:/\n', []),
])
def test_cgroup_hierarchies(mountinfo, own, expected):
    assert testbed.cgroup_hierarchies(mountinfo, own) == expected


def test_node_cgroups_are_per_prefix_and_node(monkeypatch):
    monkeypatch.setattr(testbed, '_read', lambda path: HYBRID_MOUNTINFO if path.endswith('mountinfo') else '0::/\n9:name=systemd:/\n')
    monkeypatch.setattr(testbed, 'PREFIX', 'npx2')
    assert sorted(testbed.node_cgroups('el8-h100-01')) == [
        '/sys/fs/cgroup/systemd/testbed-npx2/el8-h100-01', '/sys/fs/cgroup/unified/testbed-npx2/el8-h100-01']
