# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/plugin_utils/_imex_members.py: what the node_plan action hands the imex plan from the inventory."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _imex_members as M


class Broken(dict):
    def get(self, key, default=None):
        raise ValueError("'tray_net' is undefined")


def task_vars():
    gpus = [{'pci_bus_id': '00000009:01:00.0', 'fabric': {'state': 'Completed', 'cluster_uuid': 'u', 'clique_id': '2'},
             'name': 'NVIDIA GB200'}]
    return {'groups': {'rack7': ['tray-a', 'tray-b', 'tray-c'], 'all': ['tray-a', 'tray-b', 'tray-c', 'login']},
            'hostvars': {'tray-a': {'ansible_host': '10.0.7.3', 'ansible_facts': {'nvidia': {'gpus': gpus}}},
                         'tray-b': {'ansible_host': 'tray-b.mgmt', 'nodeprep_imex_address': '10.1.7.12'},
                         'tray-c': Broken(),
                         'login': {'ansible_host': '10.0.0.1'}}}


def test_only_the_group_is_read():
    got = M.members(task_vars(), 'rack7')
    assert got['group'] == 'rack7' and got['found'] is True
    assert [h['host'] for h in got['hosts']] == ['tray-a', 'tray-b', 'tray-c']
    assert got['hosts'][0] == {'host': 'tray-a', 'values': {'inventory_hostname': 'tray-a', 'ansible_host': '10.0.7.3'},
                               'error': None, 'fabric': [{'pci_bus_id': '00000009:01:00.0', 'fabric': {
                                   'state': 'Completed', 'cluster_uuid': 'u', 'clique_id': '2'}}]}
    assert got['hosts'][1]['values'] == {'inventory_hostname': 'tray-b', 'ansible_host': 'tray-b.mgmt',
                                         'nodeprep_imex_address': '10.1.7.12'}
    assert got['hosts'][1]['fabric'] is None
    assert got['hosts'][2]['error'] == "cannot read its address variables: 'tray_net' is undefined"


def test_no_group_and_an_unknown_group():
    assert M.members(task_vars(), None) is None
    assert M.members(task_vars(), 'rack9') == {'group': 'rack9', 'found': False, 'hosts': []}
