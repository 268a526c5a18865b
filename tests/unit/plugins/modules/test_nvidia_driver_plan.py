# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nvidia_driver_plan: reads the node's packages with one argv (LC_ALL=C), changes nothing, returns the plan."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.module_utils import basic

from ansible_collections.gpufleet.nodeprep.plugins.modules import nvidia_driver_plan

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import run_module

UBUNTU = {'os_family': 'Debian', 'distribution': 'Ubuntu', 'distribution_version': '24.04',
          'distribution_major_version': '24', 'architecture': 'x86_64'}
K = '6.8.0-45-generic'
DPKG = ('nvidia-fabricmanager\t580.95.05-1\thi \tamd64\n'
        'libnvidia-nscq\t580.95.05-1\tii \tamd64\n'
        'nvidia-open\t580.95.05-0ubuntu1\tii \tamd64\n'
        'bash\t5.2.21-2ubuntu4\tii \tamd64\n')


def test_plan_on_ubuntu(capsys, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, required=False, opt_dirs=None:
                        '/usr/bin/' + name)
    argv = ('/usr/bin/dpkg-query', '-W', '-f', '${Package}\t${Version}\t${db:Status-Abbrev}\t${Architecture}\n')
    facts = {'os': UBUNTU, 'services': {},
             'kernel_state': {'running': K, 'default': K, 'nouveau': {'loaded': False},
                              'nvidia_module': {'loaded': True, 'version': '580.95.05', 'flavour': 'open'},
                              'dkms': [{'module': 'nvidia', 'version': '580.95.05', 'kernel': K, 'status': 'installed'}],
                              'pci': {'nvswitch_fabric': 'pci', 'nvswitch_count': 4}},
             'nvidia': {'present': True, 'driver_version': '580.95.05', 'gpus': []}}
    result, seen = run_module(nvidia_driver_plan.main, {'facts': facts, 'settings': {'branch': '580'}}, capsys,
                              monkeypatch, {argv: (0, DPKG, '')})
    assert seen == [list(argv)]
    assert result['changed'] is False
    plan = result['plan']
    assert plan['ok'] is True
    # apt: persistenced at the driver's version too (R21), any Debian release of it
    assert plan['extras']['missing'] == ['nvidia-persistenced=580.95.05-*']
    assert plan['extras']['hold'] == ['nvidia-fabricmanager', 'libnvidia-nscq']
    assert result['node']['apt_holds'] == ['nvidia-fabricmanager']
    assert 'bash' not in result['node']['packages']
