#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: nic_offload
short_description: Turn NIC offload features on or off with ethtool, and say how to persist them
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Reads the features of each interface with C(ethtool -k), works out which of the requested ones differ,
    changes only those with one C(ethtool -K) per interface, then reads the features back and fails when one
    did not take (C(ethtool -K) can exit 0 and change nothing).
  - Feature names are those C(ethtool -k) prints (V(generic-receive-offload), V(tx-checksum-ipv4),
    V(rx-gro-hw)...), the short names C(ethtool -K) takes (V(rx), V(tx), V(sg), V(tso), V(gso), V(gro),
    V(lro), V(rxvlan), V(txvlan), V(ntuple), V(rxhash)) and the kernel names behind them (V(rx-gro),
    V(rx-lro), V(rx-checksum)...).
  - V(tx), V(sg) and V(tso) (and their long names) are groups; setting one sets every member the driver lets
    change. A member named on its own overrides its group; for example V(tso=false) together with
    V(tx-tcp6-segmentation=true) leaves only TCP segmentation for IPv6 on.
  - A name the device does not have fails the task and lists the device's real feature names. C(rdma-offload)
    is not an ethtool feature.
  - Settings made with C(ethtool -K) are lost at reboot. The module does not persist them; it returns in
    RV(persistence) what a role needs to do so (NetworkManager properties or systemd C(.link) keys).
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the current state and reports what would change; runs no C(ethtool -K).
  diff_mode:
    support: full
options:
  interface:
    description:
      - The interface, or a list of interfaces, to configure.
    type: list
    elements: str
    required: true
  features:
    description:
      - Feature name to wanted state (V(true) on, V(false) off).
    type: dict
    required: true
  ignore_fixed:
    description:
      - A feature the driver marks C([fixed]) cannot change. By default asking to change one fails the task.
      - With V(true), such features are skipped with a warning and listed in the C(skipped_fixed) list of RV(interfaces).
      - A fixed feature already in the wanted state never fails.
    type: bool
    default: false
requirements:
  - ethtool
seealso:
  - module: gpufleet.nodeprep.nic_facts
  - plugin: gpufleet.nodeprep.ethtool_features
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Turn GRO and LRO off on the fabric NICs
  gpufleet.nodeprep.nic_offload:
    interface: [ens1f0np0, ens1f1np1]
    features:
      gro: false
      lro: false
  register: offload

# Here the NetworkManager connection is named like the interface
- name: Persist the same on NetworkManager hosts
  ansible.builtin.command:
    argv: >-
      {{ ['nmcli', 'connection', 'modify', item.key]
         + (props | dict2items | map(attribute='key') | zip(props | dict2items | map(attribute='value')) | flatten) }}
  vars:
    props: "{{ item.value.nm_properties }}"
  loop: "{{ offload.persistence | dict2items }}"
  when: item.value.method == 'networkmanager'
  changed_when: true

- name: TSO off except for IPv6, skipping what the driver fixes
  gpufleet.nodeprep.nic_offload:
    interface: eth0
    features:
      tcp-segmentation-offload: false
      tx-tcp6-segmentation: true
    ignore_fixed: true
"""

RETURN = r"""
interfaces:
  description: What happened per interface.
  returned: always
  type: dict
  sample:
    ens1f0np0:
      changed: true
      changes:
        generic-receive-offload: {before: true, after: false}
      skipped_fixed: []
      cmd: [/usr/sbin/ethtool, -K, ens1f0np0, gro, "off"]
  contains:
    changed:
      description: Whether this interface changed (or would, in check mode).
      type: bool
    changes:
      description:
        - The features (as C(ethtool -k) prints them) that change, with their state before and after.
        - 'C([<feature>]) (dict): One entry per feature that changes.'
        - 'C([<feature>].before) (bool): Whether it was on.'
        - 'C([<feature>].after) (bool): Whether it is on after the run (predicted in check mode).'
      type: dict
    skipped_fixed:
      description: Fixed features left alone because O(ignore_fixed=true).
      type: list
      elements: str
    cmd:
      description: The C(ethtool -K) command run (or that would run in check mode); V(null) when nothing changes.
      type: list
      elements: str
persistence:
  description:
    - Per interface, what would make the requested settings survive a reboot. The module itself persists nothing.
    - Covers every feature requested (not only those changed this run), so a role can persist the wanted state.
  returned: always
  type: dict
  sample:
    ens1f0np0:
      nm_managed: true
      method: networkmanager
      nm_properties: {ethtool.feature-gro: "off"}
      nm_unsupported: []
      link_keys: {GenericReceiveOffload: "false"}
      link_unsupported: []
  contains:
    nm_managed:
      description: Whether NetworkManager manages the interface; V(null) when NetworkManager is absent or not running.
      type: bool
    method:
      description:
        - V(networkmanager) when NetworkManager manages the interface (C(nmcli connection modify CONN
          ethtool.feature-gro off)); V(systemd-networkd-link) when systemd runs and every feature has a
          systemd C(.link) key; V(unit) otherwise (a oneshot unit running C(ethtool -K) at boot).
      type: str
    nm_properties:
      description:
        - NetworkManager property name to value (V(on)/V(off)).
        - 'C([<property>]) (str): The value (V(on) or V(off)) of this NetworkManager property (V(ethtool.feature-gro),
          ...).'
      type: dict
    nm_unsupported:
      description: Requested features NetworkManager has no property for.
      type: list
      elements: str
    link_keys:
      description:
        - systemd.link C([Link]) key to value (V(true)/V(false)).
        - 'C([<key>]) (str): The value (V(true) or V(false)) of this C([Link]) key (V(GenericReceiveOffload), ...).'
      type: dict
    link_unsupported:
      description: Requested features with no systemd.link key.
      type: list
      elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._ethtool import EthtoolFeatureError
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._ethtool_names import persistence_names
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._nic_offload import (
    plan_feature_changes,
    verify_features,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nic_selection import NicError
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._nic import (
    find_tool,
    nm_device_states,
    nm_managed,
    persistence_method,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._nic_features import read_features
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import run_status


def _onoff(value):
    return 'on' if value else 'off'


def wanted_features(module):
    wanted = {}
    for name, value in (module.params['features'] or {}).items():
        try:
            wanted[name] = boolean(value, strict=True)
        except TypeError:
            module.fail_json(msg="features: the value for {0!r} is {1!r}; expected a boolean "
                                 "(true/false, yes/no, on/off)".format(name, value))
    if not wanted:
        module.fail_json(msg='features is empty; give at least one feature name and its wanted state')
    return wanted


def _took(after, changes):
    """Whether any planned change (leaf -> {before, after}) now shows its new value in ``after`` (ethtool -k)."""
    features = after['features']
    return any((features.get(leaf) or {}).get('enabled') == change['after'] for leaf, change in changes.items())


def _applied_any(module, ethtool, ifname, changes):
    """After a failed ethtool -K: whether it applied some features before failing on another."""
    try:
        after = read_features(module, ethtool, ifname)
    except NicError:
        return True  # cannot tell; a write was attempted, so do not claim nothing changed
    return _took(after, changes)


def configure(module, ethtool, ifname, wanted, states, results):
    """Plan, apply and verify one interface (its result goes into ``results`` before acting). Returns persistence."""
    parsed = read_features(module, ethtool, ifname)
    try:
        plan = plan_feature_changes(parsed, wanted, ignore_fixed=module.params['ignore_fixed'], ifname=ifname)
    except EthtoolFeatureError as exc:
        raise NicError(str(exc))
    for skipped in plan['skipped_fixed']:
        module.warn('interface {0}: {1} is fixed by the driver and was left as it is'.format(ifname, skipped))
    result = {
        'changed': bool(plan['args']),
        'changes': dict(plan['changes']),
        'skipped_fixed': plan['skipped_fixed'],
        'cmd': None,
    }
    results[ifname] = result
    if plan['args']:
        argv = [ethtool, '-K', ifname] + plan['args']
        result['cmd'] = argv
        if not module.check_mode:
            rc, out, err = run_status(module, argv)
            if rc != 0:
                # ethtool -K may have applied some features before failing on another: say whether it did.
                result['changed'] = _applied_any(module, ethtool, ifname, plan['changes'])
                raise NicError('interface {0}: ethtool -K failed (rc={1}): {2}'.format(
                    ifname, rc, ' '.join((out + '\n' + err).split()) or 'no output'),
                    cmd=argv, rc=rc, stdout=out, stderr=err)
            after = read_features(module, ethtool, ifname)
            missed = verify_features(after, plan['wanted'])
            if missed:
                result['changed'] = _took(after, plan['changes'])
                raise NicError('interface {0}: ethtool -K exited 0 but these features did not take: {1}'.format(
                    ifname, ', '.join(missed)), cmd=argv, rc=rc, stdout=out, stderr=err)
    requests = dict((name, req) for name, req in plan['requests'].items()
                    if req['target'] not in plan['skipped_fixed'])
    names = persistence_names(requests)
    managed = nm_managed(states, ifname)
    persistence = {
        'nm_managed': managed,
        'method': persistence_method(managed, names['link_unsupported']),
    }
    persistence.update(names)
    return persistence


def main():
    module = AnsibleModule(
        argument_spec=dict(
            interface=dict(type='list', elements='str', required=True),
            features=dict(type='dict', required=True),
            ignore_fixed=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    wanted = wanted_features(module)
    interfaces = []
    for name in module.params['interface']:
        if name not in interfaces:
            interfaces.append(name)
    if not interfaces:
        module.fail_json(msg='interface is empty; name at least one interface')
    results = {}
    persistence = {}
    try:
        ethtool = find_tool(module, 'ethtool')
        states = nm_device_states(module)
        for ifname in interfaces:
            persistence[ifname] = configure(module, ethtool, ifname, wanted, states, results)
    except NicError as exc:
        module.fail_json(changed=any(r['changed'] for r in results.values()), interfaces=results,
                         **exc.fail_kwargs())
    changed = any(r['changed'] for r in results.values())
    before = []
    after = []
    for ifname in interfaces:
        for leaf, change in results[ifname]['changes'].items():
            before.append('{0} {1}: {2}\n'.format(ifname, leaf, _onoff(change['before'])))
            after.append('{0} {1}: {2}\n'.format(ifname, leaf, _onoff(change['after'])))
    module.exit_json(
        changed=changed,
        interfaces=results,
        persistence=persistence,
        diff={'before': ''.join(before), 'after': ''.join(after),
              'before_header': 'ethtool -k', 'after_header': 'ethtool -k'},
    )


if __name__ == '__main__':
    main()
