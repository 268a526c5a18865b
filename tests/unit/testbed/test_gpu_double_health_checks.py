# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU double's fitness faults against the readiness health checks (rules/_gpu_health.py): what the double prints
(nvidia-smi -q -x, nvlink -s, nvlink -e), parsed by the collection's parsers as the gather and the controller do, and
judged by the checks.  A healthy profile passes every one; each fault fails its own check and no other new one.
The GPU and the words expected are written here from the fault's default (the last GPU) and the profile."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import parse_nvsmi_xml
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_health as H
from ansible_collections.gpufleet.nodeprep.tests.unit.testbed import test_gpu_double

node = test_gpu_double.node  # the double's node fixture (a root with the double installed)

SETTINGS = {'nodeprep_readiness_thresholds': {}, 'nodeprep_readiness_mig': 'disabled'}
CHECKS = (('gpu.throttle', H.throttle), ('pci.link', H.pcie_link), ('nvlink.links', H.nvlinks),
          ('gpu.remapped_rows', H.remapped_rows), ('gpu.mig', H.mig), ('gpu.vbios', H.vbios))


def judged(node):  # noqa: F811
    out, rc = node.smi('-q', '-x')
    assert rc == 0, out
    nvidia = parse_nvsmi_xml(out)
    nvidia['nvlink'] = {}
    for key, flag in (('status', '-s'), ('errors', '-e')):
        text, rc = node.smi('nvlink', flag)
        nvidia['nvlink'][key] = {'rc': rc, 'stdout': text, 'stderr': '', 'error': None}
    facts = {'nvidia': nvidia}
    return dict((check_id, func(facts, SETTINGS)) for check_id, func in CHECKS)


@pytest.mark.parametrize('profile', ['hgx-b200-8gpu', 'hgx-h100-8gpu', 'hgx-h200-8gpu', 'gb200-4gpu', 'gb300-4gpu'])
def test_a_healthy_profile_passes_every_health_check(node, profile):  # noqa: F811
    node.ready(profile)
    got = judged(node)
    assert dict((k, v[0]) for k, v in got.items()) == dict((k, 'pass') for k, _f in CHECKS), got


# The B200 profile's last GPU is 00000000:CC:00.0 (GPU 7).
@pytest.mark.parametrize('fault, text, check_id, observed', [
    ('hw-slowdown', '', 'gpu.throttle',
     'GPU 7 (00000000:CC:00.0): HW Power Brake Slowdown, HW Slowdown Active (graphics clock '),
    ('hw-slowdown', '7 thermal\n', 'gpu.throttle',
     'GPU 7 (00000000:CC:00.0): HW Slowdown, HW Thermal Slowdown Active (graphics clock '),
    ('pcie-downtrained', '', 'pci.link',
     'GPU 7 (00000000:CC:00.0): PCIe link x8 (Gen5), below x16 lanes (model b200, source captures)'),
    ('pcie-downtrained', '7 x16 gen3\n', 'pci.link', None),
    ('nvlink-inactive', '7 3,7\n', 'nvlink.links',
     'GPU 7 (00000000:CC:00.0): links 3, 7 inactive; 16 of 18 links active (oci-hpc)'),
    ('nvlink-inactive', '7 all\n', 'nvlink.links',
     'GPU 7 (00000000:CC:00.0): all NVLinks inactive, 18 wanted (oci-hpc)'),
    ('rows-pending', '', 'gpu.remapped_rows',
     'GPU 7 (00000000:CC:00.0): row remapping pending (reset the GPU or reboot to apply it)'),
    ('mig-enabled', '', 'gpu.mig', 'GPU 7 (00000000:CC:00.0): MIG Enabled current, Enabled pending'),
    ('mig-enabled', '7 pending\n', 'gpu.mig', 'GPU 7 (00000000:CC:00.0): MIG Enabled pending'),
])
def test_each_fault_fails_its_check_only(node, fault, text, check_id, observed):  # noqa: F811
    node.ready('hgx-b200-8gpu').fault(fault, text)
    got = judged(node)
    others = dict((k, v[0]) for k, v in got.items() if k != check_id)
    assert others == dict((k, 'pass') for k in others), got
    status, _expected, seen = got[check_id]
    if observed is None:
        # Gen3 at full width: the double's GPU is idle, a lower generation is power saving
        assert status == 'pass' and 'GPU 7 (00000000:CC:00.0) at Gen3 of Gen5 while idle (power saving)' in seen
        return
    assert status == 'fail'
    assert seen.startswith(observed), seen
