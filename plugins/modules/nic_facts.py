#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: nic_facts
short_description: Gather addresses, MTU, speed, driver and offload features of network interfaces
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Reads every network interface, or the ones selected by name or by network, and returns them in
    C(ansible_facts.nics), keyed by interface name.
  - Addresses come from C(ip -j addr show), MTU and link speed from C(/sys/class/net/<iface>/mtu) and
    C(/sys/class/net/<iface>/speed), driver information from C(ethtool -i) and offload features from C(ethtool -k).
  - Whether NetworkManager manages an interface comes from C(nmcli -t -f DEVICE,STATE device) when C(nmcli) is
    installed and NetworkManager runs; otherwise it is V(null).
  - Network matching is done on the managed node with Python's standard C(ipaddress) module (present since
    Python 3.3, so also on EL8's platform-python 3.6). C(netaddr) is not needed on the node.
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
  - gpufleet.nodeprep.attributes.FACTS
  - gpufleet.nodeprep.facts_module
options:
  interfaces:
    description:
      - Names of the interfaces to read.
      - When neither O(interfaces) nor O(networks) is given, every interface is read.
      - A name that does not exist fails the task and lists the interfaces that do.
    type: list
    elements: str
  networks:
    description:
      - IPv4 or IPv6 networks in CIDR form, for example V(10.0.0.0/8) or V(fd00::/64).
      - Interfaces holding an address inside one of them are read, in addition to those named in O(interfaces).
      - Host bits are allowed (V(192.0.2.7/24) means V(192.0.2.0/24)).
    type: list
    elements: str
requirements:
  - ethtool
  - iproute2 (C(ip) with JSON output, C(-j))
notes:
  - The C(fixed) flag of a group line (C(tx-checksumming), C(scatter-gather), C(tcp-segmentation-offload)) is
    true when every member of the group is fixed; ethtool prints no C([fixed]) on such lines.
seealso:
  - module: gpufleet.nodeprep.nic_offload
  - plugin: gpufleet.nodeprep.ethtool_features
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Read every interface
  gpufleet.nodeprep.nic_facts:

- name: Read the interfaces on the training fabric, and eth0
  gpufleet.nodeprep.nic_facts:
    interfaces: [eth0]
    networks: [10.203.0.0/16, fd00:203::/64]

- name: Fail when GRO is on for a fabric NIC
  ansible.builtin.assert:
    that: not ansible_facts.nics[item].features['generic-receive-offload'].enabled
  loop: "{{ ansible_facts.nics | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    nics:
      description: One entry per interface read, keyed by interface name.
      returned: always
      type: dict
      sample:
        eth0:
          mtu: 1500
          speed_mbps: 100000
          addresses:
            ipv4: [10.203.0.5/16]
            ipv6: [fe80::a288:c2ff:fe0c:1a2b/64]
          driver:
            driver: mlx5_core
            version: 6.8.12-8-pve
            firmware_version: 14.32.1900 (MT_2420110034)
            bus_info: "0000:01:00.0"
          features:
            generic-receive-offload: {enabled: true, fixed: false}
            large-receive-offload: {enabled: false, fixed: false}
            highdma: {enabled: true, fixed: true}
          nm_managed: true
      contains:
        mtu:
          description: MTU in bytes.
          type: int
        speed_mbps:
          description: Link speed in Mb/s; V(null) when the driver reports none (link down, virtual devices).
          type: int
        addresses:
          description: Addresses as C(address/prefixlen), link-local ones included.
          type: dict
          contains:
            ipv4:
              description: IPv4 addresses.
              type: list
              elements: str
            ipv6:
              description: IPv6 addresses.
              type: list
              elements: str
        driver:
          description:
            - What C(ethtool -i) prints; every value V(null) when the device has no driver information
              (loopback) and for fields printed empty.
          type: dict
          contains:
            driver:
              description: Driver name.
              type: str
            version:
              description: Driver version.
              type: str
            firmware_version:
              description: Firmware version.
              type: str
            bus_info:
              description: Bus address, for example the PCI address.
              type: str
        features:
          description:
            - Offload features keyed by the name C(ethtool -k) prints, each C({enabled, fixed}), plus C(requested) when
              ethtool shows C([requested on]) or C([requested off]).
            - 'C([<feature>]) (dict): One entry per feature, named as C(ethtool -k) prints it
              (V(generic-receive-offload), ...).'
            - 'C([<feature>].enabled) (bool): Whether the feature is on.'
            - 'C([<feature>].fixed) (bool): Whether the driver does not let it change (C([fixed])).'
            - 'C([<feature>].requested) (bool): The state asked for when it differs from the actual one; only present
              then.'
          type: dict
        nm_managed:
          description:
            - V(true) when NetworkManager manages the interface, V(false) when it lists it as unmanaged,
              V(null) when NetworkManager is not installed or not running or does not list it.
          type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._facts_module import run_facts_module
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nic_selection import NicError
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._nic_features import collect_nic_facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            interfaces=dict(type='list', elements='str'),
            networks=dict(type='list', elements='str'),
        ),
        supports_check_mode=True,
    )
    run_facts_module(module, 'nics', lambda: collect_nic_facts(module, interfaces=module.params['interfaces'],
                                                               networks=module.params['networks']),
                     (NicError,), warn_keys=())


if __name__ == '__main__':
    main()
