#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: nvidia_driver_plan
short_description: Decide what the nvidia_driver role installs, pins, enables and reboots for, without changing anything
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Reads what the decisions need from the node (the C(/etc/yum.repos.d) repositories, the installed NVIDIA packages,
    C(/etc/dnf/plugins/versionlock.list), the C(nvidia-driver) module stream; on Debian/Ubuntu the apt source and
    the held packages) and returns the plan of the C(gpufleet.nodeprep.nvidia_driver) role.
  - The plan names the driver and extra packages per branch and OS (fabric manager and nscq by branch), the CUDA
    signing key per EL version, EPEL (and CRB) when the kmod needs C(dkms), the exact versionlock entries, the
    services (no C(nvlsm) unit - the fabric manager starts NVLSM on NVLink 5), the persistence-mode drop-in for the
    packaged Ubuntu unit, why a reboot is needed, what stops the role before a reboot (Secure Boot without an enrolled
    DKMS key) and what check mode predicts.
  - The decisions live in C(plugins/module_utils/rules/_driver.py) (pure functions with pytest tables).
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
  - gpufleet.nodeprep.attributes.INFO_MODULE
options:
  facts:
    description:
      - C(os) (C(os_family), C(distribution), C(distribution_version), C(distribution_major_version),
        C(architecture), C(kernel)), C(kernel_state) (from M(gpufleet.nodeprep.kernel_facts)), C(nvidia) (from
        M(gpufleet.nodeprep.gpu_node_facts)), C(services) (from M(ansible.builtin.service_facts)) and C(units)
        (the C(nodeprep_units) of M(gpufleet.nodeprep.gpu_node_facts)).
      - When not given, the action plugin builds them on the controller from the play's C(ansible_facts) with the
        function the role's node plan uses (C(_plan_nvidia_driver.driver_facts)), so the later stages plan from the
        same inputs as the start.
    type: dict
  settings:
    description:
      - The role's settings without the C(nodeprep_nvidia_driver_) prefix - C(method), C(source), C(branch), C(version),
        C(module_type), C(package_set), C(fabricmanager), C(nvlsm), C(nscq), C(imex), C(persistenced),
        C(persistence_conflicting_units), C(repo_url), C(repo_gpgcheck), C(repo_gpgkey), C(epel), C(epel_url),
        C(epel_gpgkey), C(open_required_device_ids), C(reboot_ok).
      - When not given, those the role's node plan typed (C(ansible_facts.nodeprep_plans.nvidia_driver.args.
        driver_settings), made by M(gpufleet.nodeprep.node_plan)); the task fails when the play has no such plan.
    type: dict
  stage:
    description:
      - V(start) when the role begins, V(installed) after the driver and extras were installed (facts re-read),
        V(rebooted) after a reboot.
    type: str
    choices: [start, installed, rebooted]
    default: start
  run:
    description:
      - What this run did so far - C(start_version) (the driver when the role began), C(installing) (the driver
        packages changed or are predicted to), C(modprobe) (the registered result of C(modprobe nvidia) as it is,
        skipped or not; only its C(rc), C(stdout) and C(stderr) are read).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    details:
      - In check mode the plan also says what a real run would change that dnf, apt or systemd cannot be asked about
        yet (C(predict)).
"""

EXAMPLES = r"""
- name: Plan the driver role (types its settings, gathers what the play lacks)
  gpufleet.nodeprep.node_plan:
    roles: [nvidia_driver]

- name: Plan the driver again after modprobe, from the current facts and the typed settings
  gpufleet.nodeprep.nvidia_driver_plan:
    stage: installed
    run:
      start_version: "580.95.05"
      installing: false
      modprobe: "{{ modprobe_result }}"
  register: driver_plan

- name: Show why a reboot is needed
  ansible.builtin.debug:
    var: driver_plan.plan.reboot.reasons
"""

RETURN = r"""
plan:
  description: The decisions; see C(plugins/module_utils/rules/_driver.py) and C(docs/roles/nvidia_driver.md).
  returned: always
  type: dict
  contains:
    family:
      description: V(el), V(debian) or V(unsupported).
      type: str
    refusals:
      description: Settings that cannot work on this node, each naming the value and what is allowed.
      type: list
      elements: str
    ok:
      description: The wanted driver is installed for the kernel that boots next and loaded.
      type: bool
    installed_version:
      description: The installed driver version (DKMS build for the kernel that boots next, else the package).
      type: str
    repo:
      description: NVIDIA's repository - C(name), C(url), C(gpgcheck), C(gpgkey) (key per EL version), C(changes).
      type: dict
    epel:
      description: C(needed), C(define), C(id), C(url), C(gpgkey), C(crb) (C(id), C(file), C(enable)).
      type: dict
    install:
      description: C(needed), C(packages), C(pinning_package), C(unpin).
      type: dict
    extras:
      description: C(packages) (fabric manager and nscq or NVSDM named for the branch; on apt C(name=<version>-*)),
        C(missing), C(remove), C(hold).
      type: dict
    versionlock:
      description: C(add) and C(remove) - exact C(name-epoch:version-release.*) entries.
      type: dict
    fabric:
      description: C(kind) (V(none), V(pci), V(nvlink5)), C(fabricmanager), C(nvlsm), C(nscq), C(nvsdm),
        C(nvlink5_packages) (V(infiniband-diags) with NVLSM), C(ib_umad).
      type: dict
    services:
      description: Units to enable and start (never C(nvlsm)).
      type: list
      elements: str
    reboot:
      description: C(needed), C(reasons), C(allowed).
      type: dict
    blockers:
      description: What stops the role before a reboot (Secure Boot on without an enrolled DKMS key), with what to do.
      type: list
      elements: str
    predict:
      description: Check mode - what a real run changes that cannot be asked for yet.
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._driver_node import (
    DriverNodeError,
    read_driver_node,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._driver import driver_plan, run_state
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._driver_packages import family_of


def main():
    module = AnsibleModule(
        argument_spec=dict(
            facts=dict(type='dict'),
            settings=dict(type='dict'),
            stage=dict(type='str', default='start', choices=['start', 'installed', 'rebooted']),
            run=dict(type='dict', default={}),
        ),
        supports_check_mode=True,
    )
    facts = module.params['facts']
    if facts is None or module.params['settings'] is None:
        module.fail_json(msg='facts and settings are required when the module runs without its action plugin '
                             '(gpufleet.nodeprep.nvidia_driver_plan fills them from the play on the controller)')
    try:
        node = read_driver_node(module, family_of(facts.get('os') or {}))
    except DriverNodeError as exc:
        module.fail_json(msg=str(exc))
    plan = driver_plan(facts, module.params['settings'], node=node, stage=module.params['stage'],
                       run=run_state(module.params['run']), check_mode=module.check_mode)
    for warning in plan.get('warnings', []):
        module.warn(warning)
    module.exit_json(changed=False, plan=plan, node=node)


if __name__ == '__main__':
    main()
