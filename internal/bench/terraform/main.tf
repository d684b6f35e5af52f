# The comparison's Terraform side: bpg/proxmox VMs for the simulator's QEMU
# guests, brought under management by import blocks (not measured), then
# changed (cores, description) by the measured apply. See README.md.
terraform {
  required_providers {
    proxmox = {
      source = "bpg/proxmox"
    }
  }
}

variable "endpoint" {
  type = string
}

variable "api_token" {
  type      = string
  sensitive = true
}

# vmid => what the guest should be; written by run.sh from the simulator's
# /_sim/guests (setup: as the guests are; change: cores and description).
variable "vms" {
  type = map(object({
    node        = string
    name        = string
    cores       = number
    memory      = number
    started     = bool
    description = string
    mac         = string
  }))
}

provider "proxmox" {
  endpoint  = var.endpoint
  api_token = var.api_token
  insecure  = true
}

import {
  for_each = var.vms
  to       = proxmox_virtual_environment_vm.vm[each.key]
  id       = "${each.value.node}/${each.key}"
}

resource "proxmox_virtual_environment_vm" "vm" {
  for_each = var.vms

  node_name   = each.value.node
  vm_id       = tonumber(each.key)
  name        = each.value.name
  description = each.value.description
  started     = each.value.started
  tags        = ["demo"]

  # As the simulator's demo guests are, so that the import plans no change
  # beyond the provider's own defaults (see README.md).
  scsi_hardware   = "virtio-scsi-single"
  on_boot         = false
  keyboard_layout = null

  operating_system {
    type = "l26"
  }

  cpu {
    cores = each.value.cores
    type  = "x86-64-v2-AES"
  }

  memory {
    dedicated = each.value.memory
  }

  network_device {
    bridge      = "vmbr0"
    firewall    = true
    mac_address = each.value.mac
  }
}
