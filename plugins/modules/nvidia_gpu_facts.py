#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: nvidia_gpu_facts
short_description: Gather NVIDIA GPU facts from C(nvidia-smi -q -x)
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Runs C(nvidia-smi -q -x) once, with a hard timeout, and returns what it printed as C(ansible_facts.nvidia).
  - Reads every XML schema seen in the field (nvsmi_device DTD v10 to v13 and output without a DOCTYPE), from
    Kepler to Blackwell.
  - When C(nvidia-smi) is not installed or the driver does not answer, returns C(present=false) with C(error) set to
    what C(nvidia-smi) said, and does not fail unless O(fail_on_missing=true).
  - When C(nvidia-smi) does not answer within O(timeout) (it can hang for minutes when a GPU has fallen off the bus),
    its process group is killed and the module fails with a message naming the timeout.
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
  - gpufleet.nodeprep.attributes.FACTS
  - gpufleet.nodeprep.facts_module
options:
  timeout:
    description:
      - Seconds to wait for C(nvidia-smi -q -x) before killing it and failing.
    type: int
    default: 60
  include_supported_clocks:
    description:
      - Include C(supported_clocks) for each GPU (the list of valid memory/graphics clock pairs is large).
      - When V(false), C(supported_clocks) is V(null).
    type: bool
    default: true
  fail_on_missing:
    description:
      - Fail when C(nvidia-smi) is missing or the driver does not answer, instead of returning C(present=false).
    type: bool
    default: false
  nvidia_smi:
    description:
      - Path of the C(nvidia-smi) binary. By default it is searched in E(PATH), C(/usr/bin) and C(/usr/local/bin).
    type: path
notes:
  - The parser is shared with the P(gpufleet.nodeprep.nvidia_smi_xml#filter) filter and the
    M(gpufleet.nodeprep.nvidia_gpu) module.
  - Locked clocks (C(nvidia-smi -lgc)/C(-lmc)) are not part of C(nvidia-smi -q -x) output; see
    M(gpufleet.nodeprep.nvidia_gpu) for how they are tracked.
seealso:
  - module: gpufleet.nodeprep.nvidia_gpu
  - plugin: gpufleet.nodeprep.nvidia_smi_xml
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpufleet.nodeprep.nvidia_gpu_facts:

- name: Gather GPU facts without the supported clocks table, failing if there is no working driver
  gpufleet.nodeprep.nvidia_gpu_facts:
    include_supported_clocks: false
    fail_on_missing: true
    timeout: 30

- name: Show the GPUs
  ansible.builtin.debug:
    msg: "{{ ansible_facts.nvidia.gpus | map(attribute='name') | list }}"
  when: ansible_facts.nvidia.present
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to C(ansible_facts).
  returned: always
  type: dict
  contains:
    nvidia:
      description: NVIDIA driver and GPU state, as described in the collection's C(docs/contracts.md).
      returned: always
      type: dict
      contains:
        present:
          description: Whether C(nvidia-smi) ran and printed GPU data.
          type: bool
          returned: always
          sample: true
        error:
          description: What C(nvidia-smi) said when it did not work (or that it was not found); V(null) otherwise.
          type: str
          returned: always
          sample: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
        driver_version:
          description: Driver version.
          type: str
          returned: always
          sample: "580.105.08"
        cuda_version:
          description: Highest CUDA version the driver supports; V(null) when not reported.
          type: str
          returned: always
          sample: "13.0"
        attached_gpus:
          description:
            - Number of GPUs the driver reports. It can differ from the number of entries in
              RV(ansible_facts.nvidia.gpus)
              when a GPU is not readable.
          type: int
          returned: always
          sample: 8
        gpu_blocks:
          description: Number of C(<gpu>) blocks in the output (the length of RV(ansible_facts.nvidia.gpus)).
          type: int
          returned: always
          sample: 8
        nvidia_smi:
          description:
            - The C(nvidia-smi) binary that was run; V(null) when none was found. The gpu_settings role builds its
              commands and the replay file with this path and passes it to M(gpufleet.nodeprep.nvidia_gpu).
          type: str
          returned: always
          sample: /usr/bin/nvidia-smi
        dtd_version:
          description: Version of the C(nvsmi_device) DTD named in the output; V(null) without a DOCTYPE.
          type: int
          returned: always
          sample: 13
        timestamp:
          description: Timestamp printed by C(nvidia-smi).
          type: str
          returned: always
        gpus:
          description:
            - One entry per GPU in C(nvidia-smi) order. Values C(nvidia-smi) prints as C(N/A), C(Not Supported),
              C(Insufficient Permissions) or C(Requested functionality has been deprecated) are V(null).
            - Keys include C(index), C(pci_bus_id), C(uuid), C(name), C(architecture), C(persistence_mode),
              C(memory_total_mib), C(power_limit_w) (the limit set with C(-pl)), C(enforced_power_limit_w),
              C(default_power_limit_w), C(min_power_limit_w), C(max_power_limit_w), C(mig_mode), C(mig_devices),
              C(compute_mode), C(clocks), C(applications_clocks), C(default_applications_clocks),
              C(applications_clocks_deprecated), C(max_clocks), C(supported_clocks), C(ecc), C(retired_pages),
              C(remapped_rows), C(fabric), C(pci_device_id), C(clocks_event_reasons).
          type: list
          elements: dict
          returned: always
          contains:
            index:
              description: GPU index as C(nvidia-smi) numbers it (C(-i)).
              type: int
              returned: always
            pci_bus_id:
              description: PCI bus id, 8-digit domain, upper case (C(00000000:8F:00.0)).
              type: str
              returned: always
            uuid:
              description: GPU UUID.
              type: str
              returned: always
            name:
              description: Product name.
              type: str
              returned: always
            brand:
              description: Product brand.
              type: str
              returned: always
            architecture:
              description: Architecture (C(Hopper), C(Blackwell)); V(null) on drivers that do not print it.
              type: str
              returned: always
            serial:
              description: Board serial number; V(null) when not reported.
              type: str
              returned: always
            minor_number:
              description: Minor number of C(/dev/nvidia<N>); V(null) when not reported.
              type: int
              returned: always
            vbios_version:
              description: VBIOS version.
              type: str
              returned: always
            persistence_mode:
              description: Persistence mode; V(null) when not reported.
              type: bool
              returned: always
            memory_total_mib:
              description: Framebuffer memory in MiB.
              type: int
              returned: always
            mig_mode:
              description: Current MIG mode (C(Enabled), C(Disabled)); V(null) on GPUs without MIG.
              type: str
              returned: always
            mig_pending:
              description: MIG mode after the next GPU reset; V(null) on GPUs without MIG.
              type: str
              returned: always
            mig_devices:
              description: >-
                MIG devices (C(index), C(gpu_instance_id), C(compute_instance_id), C(multiprocessor_count),
                C(memory_total_mib)); empty without MIG.
              type: list
              elements: dict
              returned: always
              contains:
                index:
                  description: MIG device index.
                  type: int
                gpu_instance_id:
                  description: GPU instance id.
                  type: int
                compute_instance_id:
                  description: Compute instance id.
                  type: int
                multiprocessor_count:
                  description: Streaming multiprocessors.
                  type: int
                memory_total_mib:
                  description: Memory in MiB.
                  type: int
            compute_mode:
              description: Compute mode (C(Default), C(Exclusive_Process), C(Prohibited)).
              type: str
              returned: always
            performance_state:
              description: Performance state (C(P0) to C(P12)).
              type: str
              returned: always
            clocks:
              description: "Current clocks in MHz: C(graphics_mhz), C(sm_mhz), C(mem_mhz), C(video_mhz)."
              type: dict
              returned: always
              contains:
                graphics_mhz:
                  description: Graphics clock, MHz.
                  type: int
                sm_mhz:
                  description: SM clock, MHz.
                  type: int
                mem_mhz:
                  description: Memory clock, MHz.
                  type: int
                video_mhz:
                  description: Video clock, MHz.
                  type: int
            applications_clocks:
              description: Application clocks in MHz (C(graphics_mhz), C(mem_mhz)); V(null) when not reported.
              type: dict
              returned: always
              contains:
                graphics_mhz:
                  description: Graphics clock, MHz.
                  type: int
                mem_mhz:
                  description: Memory clock, MHz.
                  type: int
            default_applications_clocks:
              description: Default application clocks in MHz; V(null) when not reported.
              type: dict
              returned: always
              contains:
                graphics_mhz:
                  description: Graphics clock, MHz.
                  type: int
                mem_mhz:
                  description: Memory clock, MHz.
                  type: int
            applications_clocks_deprecated:
              description: Whether C(nvidia-smi) printed application clocks as deprecated (Blackwell and later).
              type: bool
              returned: always
            max_clocks:
              description: "Maximum clocks in MHz: C(graphics_mhz), C(sm_mhz), C(mem_mhz)."
              type: dict
              returned: always
              contains:
                graphics_mhz:
                  description: Graphics clock, MHz.
                  type: int
                sm_mhz:
                  description: SM clock, MHz.
                  type: int
                mem_mhz:
                  description: Memory clock, MHz.
                  type: int
            supported_clocks:
              description:
                - Supported graphics clocks (list of MHz, highest first) keyed by memory clock (MHz, as a string);
                  V(null) when not read (O(include_supported_clocks=false)) or not reported.
                - 'C([<mem_mhz>]) (list of int): The graphics clocks (MHz, highest first) supported with this memory
                  clock.'
              type: dict
              returned: always
            supported_clocks_incomplete:
              description: Whether the supported clocks table was cut short in the output.
              type: bool
              returned: always
            clocks_event_reasons:
              description:
                - Why the clocks are held down, one bool per reason (C(gpu_idle), C(applications_clocks_setting),
                  C(sw_power_cap), C(hw_slowdown), C(hw_thermal_slowdown), C(hw_power_brake_slowdown),
                  C(sw_thermal_slowdown), C(sync_boost)).
                - 'C([<reason>]) (bool): Whether this reason holds the clocks down now.'
              type: dict
              returned: always
            clocks_event_reasons_counters_us:
              description:
                - Microseconds each reason has held the clocks down since the driver loaded (C(sw_power_cap),
                  C(sync_boost), C(sw_therm_slowdown), C(hw_therm_slowdown), C(hw_power_brake)); V(null) where
                  nvidia-smi prints no such element (drivers before 580).
              type: dict
              returned: always
            pcie:
              description:
                - The PCIe link as nvidia-smi reads it, V(null) without a PCI section.
                - nvidia-smi's help says the current generation and width may be lower while the GPU is not in use.
              type: dict
              returned: always
              contains:
                gen_current:
                  description: Link generation now.
                  type: int
                gen_max:
                  description: Highest generation of the link (GPU and host side).
                  type: int
                gen_device_current:
                  description: Generation of the GPU side now (V(null) on drivers that do not print it).
                  type: int
                gen_device_max:
                  description: Highest generation of the GPU (V(null) on drivers that do not print it).
                  type: int
                gen_host_max:
                  description: Highest generation of the host side (V(null) where N/A).
                  type: int
                width_current:
                  description: Lanes now (C(16x) is 16).
                  type: int
                width_max:
                  description: Most lanes of the link.
                  type: int
                replay_counter:
                  description: PCIe replays since the driver loaded.
                  type: int
            ecc:
              description: >-
                ECC mode C(current) and C(pending), and the C(volatile_uncorrectable) and C(aggregate_uncorrectable)
                error counts.
              type: dict
              returned: always
              contains:
                current:
                  description: ECC mode now (V(Enabled), V(Disabled)).
                  type: str
                pending:
                  description: ECC mode after the next reset.
                  type: str
                volatile_uncorrectable:
                  description: Uncorrectable errors since the driver loaded.
                  type: int
                aggregate_uncorrectable:
                  description: Uncorrectable errors over the GPU's life.
                  type: int
            retired_pages:
              description: >-
                Page retirement (C(pending), C(single_bit), C(double_bit)) on GPUs that retire pages; V(null)
                otherwise.
              type: dict
              returned: always
              contains:
                pending:
                  description: Whether a retirement waits for a reset.
                  type: bool
                single_bit:
                  description: Pages retired for single-bit errors.
                  type: int
                double_bit:
                  description: Pages retired for double-bit errors.
                  type: int
            remapped_rows:
              description: >-
                Row remapping (C(pending), C(failure), C(correctable), C(uncorrectable)) on GPUs that remap rows;
                V(null) otherwise.
              type: dict
              returned: always
              contains:
                pending:
                  description: Whether a remapping waits for a reset.
                  type: bool
                failure:
                  description: Whether a remapping failed.
                  type: bool
                correctable:
                  description: Rows remapped for correctable errors.
                  type: int
                uncorrectable:
                  description: Rows remapped for uncorrectable errors.
                  type: int
            fabric:
              description: >-
                NVLink fabric registration (C(state), C(status), C(clique_id), C(cluster_uuid)) on GPUs in an NVLink
                domain; V(null) otherwise.
              type: dict
              returned: always
              contains:
                state:
                  description: Registration state (V(Completed), V(In Progress), V(Not Started), V(Not Supported)).
                  type: str
                status:
                  description: Registration result (V(Success) or the error).
                  type: str
                clique_id:
                  description: NVLink clique id.
                  type: str
                cluster_uuid:
                  description: NVLink domain UUID.
                  type: str
            pci_device_id:
              description: PCI device id (C(0x2901)); V(null) when not reported.
              type: str
              returned: always
            pci_vendor_id:
              description: PCI vendor id (C(0x10de)); V(null) when not reported.
              type: str
              returned: always
            temperature_c:
              description: GPU temperature in degrees Celsius.
              type: int
              returned: always
            power_limit_w:
              description: Power limit set with C(-pl), in W.
              type: float
              returned: always
            enforced_power_limit_w:
              description: >-
                Power limit the GPU enforces (lower than RV(ansible_facts.nvidia.gpus[].power_limit_w) under an out-
                of-band cap), in W.
              type: float
              returned: always
            default_power_limit_w:
              description: Default power limit, in W.
              type: float
              returned: always
            min_power_limit_w:
              description: Lowest power limit C(-pl) accepts, in W.
              type: float
              returned: always
            max_power_limit_w:
              description: Highest power limit C(-pl) accepts, in W.
              type: float
              returned: always
            power_draw_w:
              description: Power draw, in W; V(null) when not reported.
              type: float
              returned: always
          sample:
            - index: 0
              pci_bus_id: "00000000:8F:00.0"
              uuid: "GPU-00000000-0000-0000-0000-000000000000"
              name: "NVIDIA B200"
              architecture: "Blackwell"
              persistence_mode: false
              memory_total_mib: 183359
              power_limit_w: 1000.0
              default_power_limit_w: 1000.0
              min_power_limit_w: 200.0
              max_power_limit_w: 1000.0
              mig_mode: "Disabled"
              compute_mode: "Default"
              clocks: {graphics_mhz: 120, sm_mhz: 120, mem_mhz: 3996, video_mhz: 600}
              applications_clocks: {graphics_mhz: 1965, mem_mhz: 3996}
              default_applications_clocks: {graphics_mhz: 1965, mem_mhz: 3996}
              max_clocks: {graphics_mhz: 1965, sm_mhz: 1965, mem_mhz: 3996}
              ecc: {current: "Enabled", pending: "Enabled", volatile_uncorrectable: 0, aggregate_uncorrectable: 0}
              retired_pages: null
              remapped_rows: {pending: false, failure: false, correctable: 0, uncorrectable: 0}
              fabric: {state: "Completed", status: "Success"}
              pci_device_id: "0x2901"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._facts_module import exit_facts, fail_kwargs
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._nvidia_smi import (
    NvidiaCollectError,
    collect_nvidia_facts,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            timeout=dict(type='int', default=60),
            include_supported_clocks=dict(type='bool', default=True),
            fail_on_missing=dict(type='bool', default=False),
            nvidia_smi=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    if module.params['timeout'] < 1:
        module.fail_json(msg='timeout must be at least 1 second, got {0}'.format(module.params['timeout']))
    try:
        facts = collect_nvidia_facts(
            module,
            timeout=module.params['timeout'],
            include_supported_clocks=module.params['include_supported_clocks'],
            nvidia_smi=module.params['nvidia_smi'],
        )
    except NvidiaCollectError as exc:
        module.fail_json(**fail_kwargs(exc))
    if not facts['present'] and module.params['fail_on_missing']:
        module.fail_json(msg='NVIDIA driver not usable: {0}'.format(facts['error']), ansible_facts=dict(nvidia=facts))
    exit_facts(module, dict(nvidia=facts))


if __name__ == '__main__':
    main()
